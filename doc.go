// Package retryhttp is an http.RoundTripper that retries the calls a backend
// makes to flaky providers, LLM APIs above all, through any *http.Client,
// provider SDKs included.
//
// Transport wraps a base RoundTripper. After each try a Classifier decides:
// a success, or a failure that repeating will not fix, is returned as it is;
// a 429 is Throttled; a 408, a 5xx (but 501 and 505) or a transport error is
// Transient, and the request is sent again after a wait. The wait is the
// larger of the transport's own exponential Backoff and what the server asked
// for (Retry-After, retry-after-ms, or a retryDelay in its JSON error body):
// the server always wins when it asks for more, since retrying earlier than a
// provider asked makes a ban worse. A wait that does not fit the request's
// deadline, or the Budget its context carries, is not slept: the transport
// gives up at once. A Cooldown shares what a provider says across every call
// to it. Waits end when the caller's context does.
//
// Defaults: 2 retries (3 tries); DefaultBackoff (400 ms, then 800 ms, ±20%
// jitter, 30 s cap on the transport's own delay); the Classify rules; no
// per-try timeout; no Budget, Quota, Cooldown, idempotency key or Observer; a
// no-op logger; the real clock.
//
//	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, retryhttp.WithLogger(log))}
//	ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait)) // public tier
//	resp, err := client.Do(req.WithContext(ctx)) // errors.Is(err, retryhttp.ErrRateLimited): "busy"
//
// # Rules
//
// The documentation of each name cites these rules by number.
//
// R1, drop-in. RoundTrip never modifies the caller's request and always
// closes its body, sent or not; it returns a response or an error, never
// both. The first try may send the caller's request itself; every retry
// sends a clone with a fresh body from GetBody. A response that is not
// retried is returned as the base gave it, its body unread.
//
// R2, what is retried: see Classify.
//
// R3, how many: at most WithMaxRetries resends (default 2, so 3 tries); a
// negative count is 0, and math.MaxInt means no limit but the deadline and
// the Budget.
//
// R4, how long: retry n waits the largest of Backoff.Delay(n, random), the
// server's ask and the rest of a Cooldown. The server's ask is never
// shortened, and never capped by Backoff.Max.
//
// R5, the server's ask in headers: see ParseRetryAfter.
//
// R6, streams: once a response is handed over, its body is the caller's;
// nothing is re-read or re-sent.
//
// R7, fit: before each wait, the transport takes what is left (the
// request's deadline, on the transport's clock, and the Budget's Left,
// whichever is smaller). A wait not shorter than that is not slept: the
// call stops at once (OutOfTime).
//
// R8, Budget: see Budget. A request carrying one fails fast with
// ErrRateLimited on a rate limit it cannot wait out.
//
// R9, giving up: the transport stops at the first of a Permanent try (Done),
// no retries left (Exhausted), a body it cannot send again (NotReplayable),
// the Quota refusing (NoQuota), a wait that does not fit (OutOfTime). It
// returns the last response untouched, or an *Error wrapping the last
// transport error; a Permanent error on the first try, such as the caller's
// own cancellation, comes back unchanged. If the caller's context ends during
// a wait, RoundTrip returns at once an *Error with Reason Canceled. An
// *Error's Timeout reports a timeout cause, so os.IsTimeout keeps working.
//
// R10, bodies: a request body without GetBody is sent once (NotReplayable);
// a retry never sends an empty or partial body. Before a retry the failed
// response's body is drained, at most 64 KiB, and closed, so the connection
// is reused. The transport never waits on a body it will not hand back: the
// drain overlaps the wait and is abandoned when the wait ends (a wait shorter
// than 1 ms, such as a zero backoff's, gives it 1 ms all the same, so that an
// error page on its way keeps its connection), and where no wait follows it
// costs at most 40 ms of real time. This bound is on the real
// clock, not the transport's: what it bounds is a real connection.
//
// R11, idempotency: see WithIdempotencyKey. R12, retry storms: see Quota.
// R13, per-try timeout: see WithTryTimeout.
//
// R14, visible: before every wait the logger gets a Warn entry
// "llm transient failure — retrying" with attempt (1 for the first retry),
// max, status (0 for a transport error), wait_ms, wait_from ("backoff",
// "retry-after" or "cooldown"), method, url and error when there is one.
// Giving up after a Transient or Throttled try writes one Warn entry
// "llm transient failure — giving up" with reason, tries, waited_ms, status
// and url; a Cooldown hold writes "llm rate limit — waiting for cooldown"
// with wait_ms, wait_from, method and url. No log entry, Attempt or error text
// the library writes holds a query string, userinfo, a credential header's
// value or a body: URLs are written as scheme://host/path.
//
// R15, Observer: see Observer. R16, cost: a first-try success allocates
// nothing beyond the base and does no work it does not need; shared state
// (Budget, Quota, Cooldown) is not written on a success that changes nothing.
// R17, Cooldown: see Cooldown. R18, rate-limit headers: see
// ParseRateLimitReset. R19, error bodies: see ParseErrorBody; for a
// Transient or Throttled response with a JSON Content-Type the transport
// reads at most 64 KiB of the body, bounded in time as in R10, before
// deciding, and a response it hands back still yields every byte. R20: see
// Budget.Err. R21: see ResendCount.
//
// # Where the rules are silent
//
// The transport follows net/http: a base that returns both a response and
// an error has the response closed and the error used; a base that returns
// neither is a transport error; a response with a nil Body gets http.NoBody.
// X-Should-Retry and a caller's Idempotency-Key count in any spelling. An
// empty Method means GET, as in net/http, and is logged as the request has it
// (""). On an OutOfTime try an Attempt's Wait is 0 (nothing is slept) and its
// From says which side asked for the wait that did not fit: FromRetryAfter
// tells a UI that the provider, not the library, asked for too long. An
// Error's RetryAfter is the last ask of the server in the call, which may
// come from an earlier try when the last response asked nothing: it is still
// the best word the caller has of when to come back. With WithObserver given
// twice, the last one is the Observer.
//
// # Testing
//
// Package retryhttptest has what a test of code that uses the transport
// needs: a Script that stands in for the provider, and a Clock on which every
// wait of the transport takes no time and is recorded. Both work inside a
// testing/synctest bubble too, where the real clock (no WithClock at all) is
// already fake.
package retryhttp
