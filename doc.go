// Package retryhttp is an http.RoundTripper that retries the calls a backend
// makes to flaky providers, LLM APIs above all, through any *http.Client.
//
// Transport wraps a base RoundTripper. After each try a Classifier decides:
// a success or a failure that repeating will not fix is returned as it is;
// a 429 is Throttled; a 408, a 5xx (but 501 and 505) or a transport error is
// Transient, and the request is sent again after a wait. The wait is the
// larger of the transport's own exponential Backoff and the server's
// Retry-After (or retry-after-ms): the server always wins when it asks for
// more, since retrying earlier than a provider asked makes a ban worse. A wait
// that does not fit the request's deadline, or the Budget its context
// carries, is not slept: the transport gives up at once. Waits end when the
// caller's context does.
//
// Defaults: 2 retries (3 tries); DefaultBackoff (400 ms, then 800 ms, ±20%
// jitter, 30 s cap on the transport's own delay); the Classify rules; no
// per-try timeout; no Budget, Quota, idempotency key or Observer; a no-op
// logger; the real clock.
//
//	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, retryhttp.WithLogger(log))}
//	ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait)) // public tier
//	resp, err := client.Do(req.WithContext(ctx)) // errors.Is(err, retryhttp.ErrRateLimited): "busy"
//
// # Rules
//
// Drop-in (R1): the caller's request is never modified and its body is always
// closed; the first try may send the request itself, every retry sends a
// clone with a fresh body from GetBody. A request whose body has no GetBody is
// sent once (NotReplayable): a retry never sends an empty or partial body. A
// response that is not retried is returned as the base gave it, body unread;
// once handed over nothing is re-read or re-sent, so a stream is never
// retried. Before a retry the failed response's body is read (at most 64 KiB)
// and closed so the connection is reused.
//
// Giving up (R9): the transport stops at the first of a Permanent try (Done),
// no retries left (Exhausted), a body it cannot resend (NotReplayable), the
// Quota refusing (NoQuota), or a wait that does not fit (OutOfTime). It
// returns the last response untouched, or an *Error wrapping the last
// transport error (a Permanent error on the first try, such as the caller's
// own cancellation, is returned unchanged). If the caller's context ends
// during a wait, RoundTrip returns at once an *Error with Reason Canceled.
//
// Budget (R7, R8): before each wait the transport takes the smaller of the
// time to the context's deadline (on the injected clock) and the Budget's
// Left; if the wait is not shorter, it stops. A Budget is shared by every
// request whose context carries it, is charged atomically before each sleep,
// and gets back what a cancelled sleep did not use. A request that carries a
// Budget fails fast on a rate limit: when its last try was Throttled, or when
// it stops OutOfTime and the server's Retry-After alone does not fit, the
// response is closed and RoundTrip returns an *Error wrapping ErrRateLimited.
// Without a Budget the same response is handed back as it is.
//
// Options with their own rules: WithTryTimeout bounds each try until its
// response headers, never the body (R13); WithIdempotencyKey gives each
// POST or PATCH call one Idempotency-Key, the same on every try (R11);
// WithQuota shares a gRPC-style token bucket so that retries cannot multiply
// an outage (R12).
//
// Visible (R14, R15): every retry writes a Warn entry
// "llm transient failure — retrying" with attempt, max, status, wait_ms,
// wait_from, method, url and error; giving up after a failed try writes one
// "llm transient failure — giving up" with reason, tries, waited_ms, status and
// url. An Observer gets an Attempt for every try before any wait. No log
// entry, Attempt or error text of the library holds a query string, userinfo,
// a credential header's value or a body; URLs are written as
// scheme://host/path.
//
// Where the rules above are silent, the transport follows net/http: a base
// that returns both a response and an error has the response closed and the
// error used; a base that returns neither is a transport error; a response
// with a nil Body gets http.NoBody; a retry is never made of a request whose
// URL has no host or is not http or https. With a try timeout, the drain of a
// failed body is bounded by it too, so a server that stalls after its error
// headers cannot stall the loop. X-Should-Retry is read without regard to
// case, and a caller's Idempotency-Key counts in any spelling.
// Testing: pass clock.NewMock() to WithClock and advance it; every time read
// and every wait goes through it.
package retryhttp
