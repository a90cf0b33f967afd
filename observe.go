package retryhttp

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Outcome is what the transport did after a try.
type Outcome uint8

// What the transport does after a try; all but Retrying end the call.
const (
	Done          Outcome = iota // a Permanent try: returned as it is
	Retrying                     // a wait, then another try
	Exhausted                    // no retries left
	OutOfTime                    // the wait does not fit the deadline or the Budget
	NotReplayable                // the body cannot be sent again (no GetBody)
	NoQuota                      // the Quota refused the retry
	Canceled                     // the caller's context ended during a wait
	Unavailable                  // the key's circuit is open: its provider is down (R25)
)

var outcomeNames = [...]string{"done", "retrying", "exhausted", "out_of_time", "not_replayable", "no_quota", "canceled", "unavailable"}

// String returns the name used in logs: "done", "retrying", "exhausted",
// "out_of_time", "not_replayable", "no_quota", "canceled" or "unavailable".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + itoa(int(o)) + ")"
}

// WaitSource says which side set a wait (R4).
type WaitSource uint8

// The sides that can set a wait: the largest of them does.
const (
	FromBackoff    WaitSource = iota // the transport's own Backoff
	FromRetryAfter                   // the server's Retry-After, being the larger
	FromCooldown                     // the rest of a shared Cooldown, being the largest
)

// String returns "backoff", "retry-after" or "cooldown".
func (w WaitSource) String() string {
	switch w {
	case FromBackoff:
		return "backoff"
	case FromRetryAfter:
		return "retry-after"
	case FromCooldown:
		return "cooldown"
	}
	return "wait_source(" + itoa(int(w)) + ")"
}

// Attempt describes one try, for an Observer.
type Attempt struct {
	Call     uint64        // the same for every try of one RoundTrip call
	Try      int           // 1 for the first try
	MaxTries int           // 1 + max retries
	Method   string        // the request's method
	URL      string        // scheme://host/path: never the query, never userinfo
	Status   int           // 0 when Err is set
	Err      error         // the try's error, with no query or userinfo in its text
	Class    Class         // what the Classifier made of the try
	Elapsed  time.Duration // this try, until headers or error, on the injected clock
	Wait     time.Duration // wait before the next try; 0 unless Outcome is Retrying
	From     WaitSource    // which side set Wait
	Outcome  Outcome       // what the transport does next; never Canceled
	Held     time.Duration // waited for a Cooldown just before this try; 0 when none
	// FirstToken is the time from this try's send to its stream's first
	// token (R26); 0 when none came, or without WithStreamRetry.
	FirstToken time.Duration
	// StreamError is the type of the error event that failed this try's
	// stream before its first token ("overloaded_error", "UNAVAILABLE";
	// never its message, R26); "" when none did.
	StreamError string
	Priority    Priority // the call's (R27): who goes first while its key's sends wait
}

// An Observer is told of every try, in order, synchronously, before any wait,
// with the request's context: for metrics, or to show "retrying" in a UI
// (R15). It runs on the request's goroutine, so it must not block; a
// Transport shared by many goroutines calls it concurrently.
type Observer func(ctx context.Context, a Attempt)

const (
	msgRetrying = "llm transient failure — retrying"
	msgGivingUp = "llm transient failure — giving up"
	msgHolding  = "llm rate limit — waiting for cooldown"
)

// withoutCaller returns l as the transport writes with it: no stack trace and no
// caller on any entry, whatever l's own options (R14; WithLogger's doc says
// why). nil is zap.NewNop().
func withoutCaller(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l.WithOptions(zap.AddStacktrace(noLevel), zap.WithCaller(false))
}

// noLevel enables no level: zap.AddStacktrace(noLevel) never adds a stack.
var noLevel = zap.LevelEnablerFunc(func(zapcore.Level) bool { return false })

// logHold writes the entry of a call held by a Cooldown (R17): Info for
// a hold by the provider's word (its ask, its reset), Debug for a wait for
// a paced slot. Both are the Cooldown doing its work, not a fault: an
// operator leaves Warn on, and a healthy fleet paced by a provider's limit
// wrote ten Warn lines a second. Sampled per provider (sampled).
func logHold(cfg *config, r *http.Request, key string, wait time.Duration, fromHold bool, p Priority) {
	level := zap.DebugLevel
	if fromHold {
		level = zap.InfoLevel
	}
	ce := cfg.logger.Check(level, msgHolding)
	if ce == nil {
		return
	}
	n, ok := cfg.logs.take(msgHolding, r.URL, cfg.clock.Now())
	if !ok {
		return
	}
	fields := make([]zap.Field, 0, 7)
	fields = append(fields,
		zap.Int64("wait_ms", wait.Milliseconds()),
		zap.String("wait_from", FromCooldown.String()),
		zap.String("priority", p.String()),
		zap.String("method", r.Method),
		zap.String("url", safeURL(r.URL)),
	)
	ce.Write(countOf(n, keyField(fields, key)...)...)
}

// keyField appends the Cooldown key of the call an entry is about, when it
// says more than the url (a model, KeyByModel; a caller's key function's,
// hashed: Cooldown.logKey): "" adds nothing.
func keyField(fields []zap.Field, key string) []zap.Field {
	if key == "" {
		return fields
	}
	return append(fields, zap.String("key", key))
}

// countOf appends to fields the count of the entries one written stands
// for, when it stands for more than itself.
func countOf(n int, fields ...zap.Field) []zap.Field {
	if n > 1 {
		fields = append(fields, zap.Int("count", n))
	}
	return fields
}

// askSource says where the server's ask for a wait came from, for the
// ask_from field (R14). wait_from only says which side set the wait, and a
// JSON body's retryDelay sets it as "retry-after" when no Retry-After header
// was sent (the Gemini SDK's case): ask_from tells the two apart.
type askSource uint8

const (
	askNone   askSource = iota // the server asked nothing: no ask_from
	askHeader                  // Retry-After or retry-after-ms (R5)
	askBody                    // a JSON error body's retryDelay (R19)
)

// askOf is where a try's ask came from: hasAsk and inBody as readAsk left
// them.
func askOf(hasAsk, inBody bool) askSource {
	switch {
	case !hasAsk:
		return askNone
	case inBody:
		return askBody
	}
	return askHeader
}

// appendTo adds the ask_from field to fields when the server asked.
func (a askSource) appendTo(fields []zap.Field) []zap.Field {
	switch a {
	case askHeader:
		return append(fields, zap.String("ask_from", "header"))
	case askBody:
		return append(fields, zap.String("ask_from", "body"))
	}
	return fields
}

// fields is how many fields appendTo adds: 1 when the server asked.
func (a askSource) fields() int {
	if a == askNone {
		return 0
	}
	return 1
}

// errFields is how many fields an entry gives err: 1 unless it is nil.
func errFields(err error) int {
	if err == nil {
		return 0
	}
	return 1
}

// streamField appends the stream_error field of a try whose stream began
// with an error event (R26): its type, never its message.
func streamField(fields []zap.Field, streamErr string) []zap.Field {
	if streamErr == "" {
		return fields
	}
	return append(fields, zap.String("stream_error", streamErr))
}

// strFields is how many fields an entry gives s: 1 unless it is "".
func strFields(s string) int {
	if s == "" {
		return 0
	}
	return 1
}

// logRetry writes the Warn entry that makes every retry visible (R14), with
// ask_from when the try's server asked for a wait and stream_error when
// its stream began with an error event (R26).
func logRetry(l *zap.Logger, r *http.Request, key string, retry, maxRetries, status int, streamErr string, wait time.Duration, from WaitSource, ask askSource, err error) {
	ce := l.Check(zap.WarnLevel, msgRetrying)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 8+strFields(streamErr)+ask.fields()+errFields(err)) // one allocation, no larger than needed
	fields = append(fields,
		zap.Int("attempt", retry),
		zap.Int("max", maxRetries),
		zap.Int("status", status),
	)
	fields = streamField(fields, streamErr)
	fields = append(fields,
		zap.Int64("wait_ms", wait.Milliseconds()),
		zap.String("wait_from", from.String()),
	)
	fields = ask.appendTo(fields)
	fields = append(fields,
		zap.String("method", r.Method),
		zap.String("url", safeURL(r.URL)),
	)
	fields = keyField(fields, key)
	if err != nil {
		// The text only: zap.Error would add errorVerbose, the error's %+v,
		// which scrub cannot see into.
		fields = append(fields, zap.String("error", err.Error()))
	}
	ce.Write(fields...)
}

// logGiveUp writes the give-up entry of a call that stops before a try is
// sent (a Cooldown's hold, cooldown_call.go): no server asked anything of it.
func logGiveUp(cfg *config, r *http.Request, key string, reason Outcome, tries int, waited time.Duration, status int, err error) {
	logGiveUpAfter(cfg, r, key, reason, tries, waited, status, "", askNone, err)
}

// logGiveUpAfter writes the one Warn entry of a call that stops after a
// Transient or Throttled try (R14), with ask_from when that try's server
// asked for a wait and stream_error when its stream began with an error
// event (R26). Give-ups that repeat are sampled: at most one entry a
// second per provider, with the count of those it stands for (a caller's
// loop around calls that fail at once wrote 13,147 Warn lines in one
// second).
func logGiveUpAfter(cfg *config, r *http.Request, key string, reason Outcome, tries int, waited time.Duration, status int, streamErr string, ask askSource, err error) {
	ce := cfg.logger.Check(zap.WarnLevel, msgGivingUp)
	if ce == nil {
		return
	}
	n, ok := cfg.logs.take(msgGivingUp, r.URL, cfg.clock.Now())
	if !ok {
		return
	}
	fields := make([]zap.Field, 0, 7+strFields(streamErr)+ask.fields()+errFields(err)) // one allocation, no larger than needed
	fields = append(fields,
		zap.String("reason", reason.String()),
		zap.Int("tries", tries),
		zap.Int64("waited_ms", waited.Milliseconds()),
		zap.Int("status", status),
	)
	fields = streamField(fields, streamErr)
	fields = ask.appendTo(fields)
	fields = append(fields, zap.String("url", safeURL(r.URL)))
	fields = keyField(fields, key)
	if err != nil {
		// The text only: zap.Error would add errorVerbose, the error's %+v,
		// which scrub cannot see into.
		fields = append(fields, zap.String("error", err.Error()))
	}
	ce.Write(countOf(n, fields...)...)
}

// safeURL returns scheme://host/path of u: the query, the fragment and the
// userinfo may hold secrets (an API key in ?key=, a password in user:pass@;
// CVE-2024-6104 logged them) and are never written anywhere (R14).
func safeURL(u *url.URL) string {
	switch {
	case u == nil:
		return ""
	case u.Scheme != "" && u.Host != "" && u.Opaque == "":
		// Every URL a request is sent to: one concatenation, one allocation
		// (url.URL.String would build it in a Builder, and re-escape the
		// host).
		return u.Scheme + "://" + u.Host + u.EscapedPath()
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// scrub returns err unchanged unless its text holds a secret of req (the
// query, the userinfo, or the value of a credential header): then it returns
// an error with that text redacted that still unwraps to err, so errors.Is
// and errors.As keep working. Base transports rarely put such things in their
// errors, but a wrapper that puts the URL in may, and the text reaches logs.
func scrub(err error, req *http.Request) error {
	if err == nil || req == nil {
		return err
	}
	text := err.Error()
	clean := text
	for _, secret := range secretsOf(req) {
		if len(secret) >= 3 { // shorter strings would redact innocent text
			clean = strings.ReplaceAll(clean, secret, "[redacted]")
		}
	}
	if clean == text {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

func secretsOf(req *http.Request) []string {
	var s []string
	if u := req.URL; u != nil {
		if u.RawQuery != "" {
			// The query as sent, as re-encoded by a wrapper (sorted), and
			// each value alone: an error may quote just the key.
			s = append(s, u.RawQuery)
			q := u.Query()
			s = append(s, q.Encode())
			for _, values := range q {
				for _, v := range values {
					if len(v) >= 4 { // "x=1" holds no secret worth blanking every "1" for
						s = append(s, v, url.QueryEscape(v))
					}
				}
			}
		}
		if u.Fragment != "" {
			s = append(s, u.Fragment)
		}
		if u.User != nil {
			s = append(s, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				s = append(s, p, url.QueryEscape(p))
			}
		}
	}
	for name, values := range req.Header {
		if !isCredentialHeader(name) {
			continue
		}
		for _, v := range values {
			s = append(s, v)
			if _, token, ok := strings.Cut(v, " "); ok { // "Bearer sk-...": the token alone too
				s = append(s, strings.TrimSpace(token))
			}
		}
	}
	// Longest first, so that a secret containing another is blanked whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return s
}

func isCredentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, part := range []string{"auth", "key", "token", "cookie", "secret", "session", "signature"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
