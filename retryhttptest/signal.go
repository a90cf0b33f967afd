package retryhttptest

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A Signal is one of the ways a server says how long to wait: a form of
// Retry-After (R5) or of a rate limit's reset (R18). Reply.Asks writes it, so
// that one table can run a case through every form. The transport reads the
// rate-limit forms only when it has a Cooldown: see Reply.Asks.
type Signal uint8

// The forms a server says "wait d" in.
const (
	RetryAfterSeconds Signal = iota // Retry-After: 2 (delay-seconds; 1.5 when d has a fraction)
	RetryAfterMs                    // retry-after-ms: 2000 (OpenAI, Anthropic; a fraction when d has one)
	RetryAfterDate                  // Retry-After: an HTTP-date, d after the time served, rounded up to the second
	OpenAIReset                     // x-ratelimit-remaining-requests: 0, x-ratelimit-reset-requests: 2s (OpenAI, Azure)
	AnthropicReset                  // anthropic-ratelimit-requests-remaining: 0, anthropic-ratelimit-requests-reset: RFC 3339 time
	RateLimitReset                  // RateLimit-Remaining: 0, RateLimit-Reset: 2 (IETF draft; seconds, rounded up)
	RateLimitField                  // RateLimit: "default";r=0;t=2 (IETF draft's structured field; seconds, rounded up)
)

var signalNames = [...]string{"retry-after", "retry-after-ms", "retry-after-date", "openai-reset", "anthropic-reset", "ratelimit-reset", "ratelimit"}

// String returns a short name for the form, fit for a subtest: "retry-after",
// "retry-after-ms", "retry-after-date", "openai-reset", "anthropic-reset",
// "ratelimit-reset" or "ratelimit".
func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return "signal(" + strconv.Itoa(int(s)) + ")"
}

// Asks returns r with headers that ask the client to wait d, in the form s:
//
//	retryhttptest.Status(429).Asks(retryhttptest.RetryAfterDate, 2*time.Second)
//
// The headers are written each time the reply is served, so the forms that
// carry a time (RetryAfterDate, AnthropicReset) are d after that instant on
// the Script's clock (time.Now without one). Forms with whole seconds round
// d up: with RetryAfterDate the transport reads a wait in [d, d+1s), exactly
// d when the clock is on a whole second (a NewClock is, until a wait with a
// fraction of a second).
//
// The rate-limit forms (OpenAIReset, AnthropicReset, RateLimitReset,
// RateLimitField) say the limit is exhausted (remaining 0), and act only on
// a Transport with a Cooldown (retryhttp.WithCooldown), which reads them with
// retryhttp.ParseRateLimitReset (R17, R18). Without a Cooldown the transport
// ignores them: a 429 that carries only a rate-limit form waits the backoff,
// and a 200 that carries one changes nothing.
//
// With a Cooldown, a reset holds every call to the key, the retry of the call
// that got it included (From FromCooldown), not until the reset but until
// one resolution of its form before it: the limit may be back at any time in
// that last resolution, and there the calls go paced. OpenAIReset, to the
// millisecond, holds until a millisecond before (2 s holds 1.999 s);
// AnthropicReset, RateLimitReset and RateLimitField, to the second, until a
// second before (3 s holds 2 s; the last two round d up to whole seconds
// first, so 1.5 s holds 1 s). So a 1 s reset in a whole-second form holds
// nothing, and the retry waits its backoff. A Cooldown reads a success only
// for a key it already watches (one the provider has limited): on a 200 to
// any other key, an exhausted count arms nothing; the 429 that follows does.
// The Retry-After forms act on any Transport, on a Transient or Throttled
// reply.
//
// A negative d counts as 0; Asks may be called more than once.
func (r Reply) Asks(s Signal, d time.Duration) Reply {
	r.signals = append(r.signals[:len(r.signals):len(r.signals)], signal{form: s, d: max(d, 0)})
	return r
}

type signal struct {
	form Signal
	d    time.Duration
}

// write sets the signal's headers on h for a reply served at now.
func (s signal) write(h http.Header, now time.Time) {
	switch s.form {
	case RetryAfterSeconds:
		h.Set("Retry-After", decimal(s.d, time.Second))
	case RetryAfterMs:
		h.Set("Retry-After-Ms", decimal(s.d, time.Millisecond))
	case RetryAfterDate:
		h.Set("Retry-After", ceilSecond(now.Add(s.d)).UTC().Format(http.TimeFormat))
	case OpenAIReset:
		h.Set("X-Ratelimit-Remaining-Requests", "0")
		h.Set("X-Ratelimit-Reset-Requests", s.d.String()) // "1s", "6m0s", "20ms": OpenAI's own format
	case AnthropicReset:
		h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		h.Set("Anthropic-Ratelimit-Requests-Reset", now.Add(s.d).UTC().Format(time.RFC3339Nano))
	case RateLimitReset:
		h.Set("Ratelimit-Remaining", "0")
		h.Set("Ratelimit-Reset", strconv.FormatInt(ceilSeconds(s.d), 10))
	case RateLimitField:
		h.Set("Ratelimit", `"default";r=0;t=`+strconv.FormatInt(ceilSeconds(s.d), 10))
	}
}

// decimal writes d as a count of unit, with a decimal fraction when it has
// one ("2", "1.5", "0.25"), exactly: what retryhttp.ParseRetryAfter reads
// back as d.
func decimal(d, unit time.Duration) string {
	s := strconv.FormatInt(int64(d/unit), 10)
	frac := d % unit
	if frac == 0 {
		return s
	}
	digits := len(strconv.FormatInt(int64(unit), 10)) - 1 // 9 for seconds, 6 for milliseconds
	f := strconv.FormatInt(int64(frac), 10)
	f = strings.Repeat("0", digits-len(f)) + f
	return s + "." + strings.TrimRight(f, "0")
}

func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); s.Before(t) {
		return s.Add(time.Second)
	}
	return t
}

func ceilSeconds(d time.Duration) int64 {
	n := int64(d / time.Second)
	if d%time.Second != 0 {
		n++
	}
	return n
}
