// Package retryhttptest is a kit for testing code that calls providers
// through retryhttp, as net/http/httptest is for net/http (R22). A
// Script stands in for the provider below the transport: it answers each try
// from a list of replies and records every request. A Clock makes each wait
// of the transport take no time and remembers it. A Provider plays a rate
// limited LLM API, to test a client under its limits (see A fake provider).
// A table-driven test of an app function is then short and exact, with no
// goroutine and no real sleep:
//
//	func TestSummarize(t *testing.T) {
//		noJitter := retryhttp.Backoff{Base: 400 * time.Millisecond, Factor: 2}
//		tests := []struct {
//			name    string
//			replies []retryhttptest.Reply
//			want    string
//			waits   []time.Duration
//		}{
//			{"first try", []retryhttptest.Reply{{Body: "ok"}}, "ok", nil},
//			{"two 503s", []retryhttptest.Reply{retryhttptest.Status(503), retryhttptest.Status(503), {Body: "ok"}},
//				"ok", []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}},
//			{"asks 2s", []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "2"), {Body: "ok"}},
//				"ok", []time.Duration{2 * time.Second}},
//			{"asks 30s", []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "30")}, "busy", nil},
//		}
//		for _, tt := range tests {
//			t.Run(tt.name, func(t *testing.T) {
//				clk := retryhttptest.NewClock()
//				script := retryhttptest.NewScript(tt.replies...).WithClock(clk)
//				client := &http.Client{Transport: retryhttp.New(script,
//					retryhttp.WithClock(clk), retryhttp.WithBackoff(noJitter))}
//
//				got, err := Summarize(t.Context(), client, "a long text")
//				require.NoError(t, err)
//				assert.Equal(t, tt.want, got)
//				assert.Equal(t, tt.waits, clk.Waits())
//			})
//		}
//	}
//
// # Replies
//
// A Reply is a status, headers and a body (Status, or a Reply literal), or a
// transport error (Fail). Reply.Asks adds the headers by which a server says
// how long to wait, in each of the forms the transport reads (Signal):
// Retry-After in seconds or as an HTTP-date, retry-after-ms, and the
// rate-limit resets of OpenAI, Anthropic and the IETF draft (which only a
// Transport with a Cooldown reads). Reply.Cut makes a stream that breaks
// mid-body. Stream makes an event stream whose body comes in parts
// (Chunk), each after its wait, a part a Read (Split cuts one a byte a
// Read; Event formats a server-sent event), and Reply.Open one that never
// ends: on a Script's Clock a stall takes no time, and a timer of the
// transport that falls due in it and ends the try ends it at its instant.
// Hang is a try that gets no
// answer until its context ends, for per-try timeouts. Script.Requests and Script.Len tell what was sent, and
// when; Len is 0 when nothing was.
//
// # A fake provider
//
// A Script says what the provider answers; a Provider decides it, as a rate
// limited LLM API does, for tests of what a client does under a limit: a
// Cooldown set-up, a worker pool, a public-tier deadline. Its limits
// (ProviderConfig) are token buckets: requests, tokens (ceil(len(body) ÷ 4)
// a request), and Anthropic's input and output tokens (the body's max_tokens
// and its kin). A request is admitted only when every limit has room for its
// cost (remaining >= cost, as real providers refuse as soon as remaining <
// cost), and charged to all of them; the others get a 429 at once, charging
// nothing, that says in the provider's Dialect which limit refused and when
// it will have room: OpenAI's x-ratelimit headers, retry-after-ms and error
// body; Anthropic's anthropic-ratelimit headers and whole-second
// Retry-After; a bare Retry-After in Azure's words; Gemini's retryDelay in
// a google.rpc.RetryInfo; or nothing at all. Provider.Outage refuses
// everything for a while; ProviderConfig.Latency makes successes slow;
// Provider.Stats counts what was admitted and what refused it. As OpenAI's
// and Anthropic's, the limits can be per model: ProviderConfig.Models gives
// a model buckets of its own (ModelLimits), which only its requests spend
// and its answers count, while every other model shares the Provider's; a
// request's model is the one RequestModel finds (a JSON body's "model",
// Gemini's path), and Provider.ModelStats counts each model.
//
// A Provider is an http.RoundTripper, to be the base of a Transport with no
// network, and an http.Handler, for an httptest.Server on 127.0.0.1 (for a
// client that must dial, such as an SDK's). Its time is ProviderConfig.Clock:
// give it the test's Clock, and calls made one after another are exact. Calls
// from many goroutines belong in a testing/synctest bubble, where the real
// clock is the bubble's and every goroutine's waits overlap as in real time:
//
//	func TestCooldownSetUp(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{
//				Dialect:  retryhttptest.AnthropicDialect,
//				Requests: retryhttptest.PerMinute(50),
//				Tokens:   retryhttptest.PerMinute(40000),
//			})
//			client := &http.Client{Transport: newTransport(provider)} // the app's set-up, over the fake
//			var wg sync.WaitGroup
//			for range 8 {
//				wg.Go(func() { callMany(t, client, 25) })
//			}
//			wg.Wait()
//			s := provider.Stats()
//			assert.LessOrEqual(t, float64(s.Requests)/float64(s.Admitted), 1.1)
//		})
//	}
//
// Use the RoundTripper there, not a loopback server: see testing/synctest
// below.
//
// A Cooldown remembers what a provider said across calls: that is its job.
// A table test that shares one Cooldown across its rows (one client made
// once, as an app makes it) starts each row clean with Cooldown.Reset, else
// a row's "Retry-After: 30" holds the next row's calls.
//
// # Which waits the Clock advances, and why
//
// The transport waits in one way only: a Timer on its clock, for every wait
// between tries (a backoff, a server's Retry-After, whichever is larger) and
// for every Cooldown hold before a try. On a Clock each of them moves the
// clock on at once by exactly its length and is recorded in Clock.Waits, so a
// test asserts the waits themselves: [400ms 800ms] with a Backoff without
// jitter, [2s] for "Retry-After: 2". A per-try timeout (WithTryTimeout) is not
// a wait: it is an AfterFunc, and fires only when the clock's time moves past
// it, as it would in production: through a wait, Clock.Add, or a Hang reply
// of a Script on the Clock, which moves the clock to the timeout itself. So a
// try that answers in time is never cut, and one that hangs is cut at exactly
// the timeout.
//
// The transport compares a request's context deadline with its clock's now.
// NewClock starts at the real time, so a deadline set with context.WithTimeout
// makes sense to it; but the Clock runs ahead of real time with each wait,
// and the transport will find such a deadline passed long before the context
// ends. Use Clock.WithTimeout for deadlines on the Clock. Draining a failed
// body is bounded in real time, not on the Clock: a Script's bodies never
// stall.
//
// # testing/synctest
//
// With the default real clock, the transport's waits are time.Timers, so in a
// testing/synctest bubble they take no real time either, and are exact in the
// bubble's time: use a Script (or a Provider) as the base, with no
// WithClock at all, and read the times from Script.Requests (stamped with
// time.Now, which is the bubble's). A Hang reply blocks on its context there, and the per-try timeout
// fires at its instant. What does not work in a bubble is a real network: a
// goroutine blocked on a loopback connection (an httptest.Server's, and above
// all an idle keep-alive one) is not durably blocked, so while one is open the
// bubble's time stands still and the transport's wait never ends. Use a
// Script, or a server on net.Pipe, inside a bubble.
package retryhttptest
