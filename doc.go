// Package retryhttp is an http.RoundTripper that retries the calls a backend
// makes to flaky providers, LLM APIs above all, through any *http.Client,
// provider SDKs included.
//
// A [Transport] wraps a base RoundTripper. After each try a [Classifier]
// decides: a success, or a failure that repeating will not fix, is returned
// as it is; a 429 is Throttled; a 408, a 5xx (but 501 and 505) or a transport
// error is Transient, and the request is sent again after a wait. The wait is
// the larger of the transport's own [Backoff] and what the server asked for
// (Retry-After, retry-after-ms, or a retryDelay in its JSON error body): the
// server always wins when it asks for more, since retrying earlier than a
// provider asked makes a ban worse. A wait that does not fit the request's
// deadline, or the [Budget] its context carries, is not slept: the transport
// gives up at once. Waits end when the caller's context does. A retry resends
// the body whole, from GetBody, or not at all; a response handed back is the
// caller's, its body unread.
//
// Defaults: 2 retries (3 tries); [DefaultBackoff] (400 ms, then 800 ms, ±20%
// jitter, 30 s cap on the transport's own delay); no single wait of
// [DefaultMaxWait] (5 minutes) or more; the [Classify] rules; no per-try
// timeout; no Budget, Quota, Cooldown, idempotency key or Observer; a no-op
// logger; the real clock; event streams handed over unread.
//
// # Streams: retried until the first token
//
// A provider may fail a streamed answer after its 200 (an error event such
// as Anthropic's overloaded_error) or stall before its first token. With
// [WithStreamRetry], a 2xx event stream is read ahead to its first token
// before RoundTrip returns: an error event first fails the try as its
// status would, a stream with no token in time is cut and retried, and the
// stream that brings its first token is handed over byte for byte, never
// retried after that.
//
//	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, retryhttp.WithLogger(log))}
//	ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait)) // public tier
//	resp, err := client.Do(req.WithContext(ctx)) // errors.Is(err, retryhttp.ErrRateLimited): "busy"
//
// # Budget: the waits of a user's turn
//
// A [Budget] caps the time that every call carrying it spends waiting, so
// the calls of one user turn share one allowance. A call that carries one
// fails fast with [ErrRateLimited] on a rate limit it cannot wait out, and
// [Budget.Err] still tells "busy" after an SDK that hides the transport's
// error.
//
// # Quota and Cooldown: what calls share
//
// A [Quota] (WithQuota) is a token bucket shared by many calls that stops
// retries while most tries fail, so that retries do not multiply an outage.
// A [Cooldown] (WithCooldown) shares what a provider says about the client:
// when it asks one call to wait, or its rate-limit headers say a limit is
// spent ([ParseRateLimitReset]), the other calls to it hold too; and once it
// has limited the client, every call to it is paced by each limit it states,
// requests and tokens ([WithTokens], [EstimateTokens]), at its rate (the
// provider's own, from its counts, or one learned from its 429s), each wait
// fitted to the deadline and the Budget. A Store ([WithStore], the contract
// of package [github.com/retryhttp/retryhttp/store]) shares a Cooldown's
// state with the other replicas of a backend, so that together they send at
// the provider's rate (package github.com/retryhttp/retryhttp/retryredis
// keeps it on Redis). With [WithCircuit], a Cooldown also stops sending to a
// provider that is down, and its calls fail at once with [ErrUnavailable].
//
// # Seeing the retries
//
// The logger (WithLogger) gets a zap Warn entry before every retry's wait
// and when the transport gives up after a failed try, and an Info or Debug
// entry when a Cooldown holds a call (a program that logs with log/slog
// gives its *slog.Logger to WithSlog instead, for the same entries as slog
// records); an [Observer] (WithObserver) gets an [Attempt] for every try,
// before any wait. An [*Error] says why the
// transport stopped (an [Outcome]) and unwraps to the cause. [ResendCount]
// tells a RoundTripper below the retries how many tries of the call went
// before. Nothing the library writes holds a query string, userinfo, a
// credential header's value or a body.
//
// # Rules
//
// What the transport does is set down as rules R1 to R27 in [RULES.md], at
// the root of the repository; the documentation of each name cites them by
// number, as in "(R4)".
//
// # Testing
//
// Package [github.com/retryhttp/retryhttp/retryhttptest] has what a test of
// code that uses the transport needs: a Script that stands in for the
// provider, and a Clock on which every wait of the transport takes no time
// and is recorded. Both work inside a testing/synctest bubble too, where the
// real clock (no WithClock at all) is already fake.
//
// [RULES.md]: https://github.com/retryhttp/retryhttp/blob/main/RULES.md
package retryhttp
