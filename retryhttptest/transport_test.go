package retryhttptest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noJitter is DefaultBackoff without its jitter: 400 ms, 800 ms, 1.6 s...
var noJitter = retryhttp.Backoff{Base: 400 * time.Millisecond, Factor: 2, Max: 30 * time.Second}

const ms = time.Millisecond

// call sends a GET through a transport over script, both on clk, and
// returns the status (0 on error) and the error.
func call(t *testing.T, ctx context.Context, clk *retryhttptest.Clock, script *retryhttptest.Script, opts ...retryhttp.Option) (int, error) {
	t.Helper()
	opts = append([]retryhttp.Option{retryhttp.WithClock(clk), retryhttp.WithBackoff(noJitter)}, opts...)
	client := &http.Client{Transport: retryhttp.New(script.WithClock(clk), opts...)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/chat", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, nil
}

// gaps returns the time between each request the script received and the
// one before it.
func gaps(reqs []retryhttptest.Request) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(reqs); i++ {
		d = append(d, reqs[i].At.Sub(reqs[i-1].At))
	}
	return d
}

// The transport's waits, seen on the Clock, are exactly R4's.
func TestTransportWaitsAreExact(t *testing.T) {
	const (
		rs  = retryhttptest.RetryAfterSeconds
		rms = retryhttptest.RetryAfterMs
		rd  = retryhttptest.RetryAfterDate
	)
	s503, ok := retryhttptest.Status(503), retryhttptest.Status(200)
	tests := []struct {
		name    string
		replies []retryhttptest.Reply
		status  int
		waits   []time.Duration
	}{
		{"success: no wait", []retryhttptest.Reply{ok}, 200, nil},
		{"503, 503, 200: backoff", []retryhttptest.Reply{s503, s503, ok}, 200, []time.Duration{400 * ms, 800 * ms}},
		{"always 503: exhausted", []retryhttptest.Reply{s503}, 503, []time.Duration{400 * ms, 800 * ms}},
		{"reset, then 200", []retryhttptest.Reply{retryhttptest.Fail(syscall.ECONNRESET), ok}, 200, []time.Duration{400 * ms}},
		{"Retry-After: 2", []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "2"), ok}, 200, []time.Duration{2 * time.Second}},
		{"Retry-After shorter than backoff", []retryhttptest.Reply{retryhttptest.Status(503, "Retry-After", "0.1"), ok}, 200, []time.Duration{400 * ms}},
		{"Asks seconds", []retryhttptest.Reply{retryhttptest.Status(429).Asks(rs, 1500*ms), ok}, 200, []time.Duration{1500 * ms}},
		{"Asks ms", []retryhttptest.Reply{retryhttptest.Status(503).Asks(rms, 2250*ms), ok}, 200, []time.Duration{2250 * ms}},
		{"Asks date", []retryhttptest.Reply{retryhttptest.Status(429).Asks(rd, 2*time.Second), ok}, 200, []time.Duration{2 * time.Second}},
		{"Asks date after a backoff: rounded up to the second", []retryhttptest.Reply{s503, retryhttptest.Status(429).Asks(rd, 2*time.Second), ok},
			200, []time.Duration{400 * ms, 2600 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := retryhttptest.NewClock()
			start := clk.Now()
			script := retryhttptest.NewScript(tt.replies...)
			realStart := time.Now()
			status, err := call(t, context.Background(), clk, script)
			require.NoError(t, err)
			assert.Equal(t, tt.status, status)
			assert.Equal(t, tt.waits, clk.Waits())
			assert.Equal(t, tt.waits, gaps(script.Requests()), "each try was sent right after its wait")
			var sum time.Duration
			for _, w := range tt.waits {
				sum += w
			}
			assert.Equal(t, sum, clk.Since(start))
			assert.Less(t, time.Since(realStart), time.Second, "no real sleep")
		})
	}
}

// attempts is an Observer that keeps every Attempt.
type attempts struct {
	mu   sync.Mutex
	list []retryhttp.Attempt
}

func (a *attempts) observe(_ context.Context, at retryhttp.Attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append(a.list, at)
}

func (a *attempts) get() []retryhttp.Attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]retryhttp.Attempt(nil), a.list...)
}

// A hanging try is cut by WithTryTimeout at exactly the timeout, on the
// Clock, with no goroutine and no real wait (R13).
func TestTransportTryTimeoutCutsHangAtExactlyTheTimeout(t *testing.T) {
	tests := []struct {
		name    string
		replies []retryhttptest.Reply
		status  int
		elapsed []time.Duration // per try
		gaps    []time.Duration // between requests
	}{
		{"hang, then 200", []retryhttptest.Reply{retryhttptest.Hang(), retryhttptest.Status(200)},
			200, []time.Duration{5 * time.Second, 0}, []time.Duration{5*time.Second + 400*ms}},
		{"hang every time", []retryhttptest.Reply{retryhttptest.Hang()},
			0, []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}, []time.Duration{5*time.Second + 400*ms, 5*time.Second + 800*ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := retryhttptest.NewClock()
			script := retryhttptest.NewScript(tt.replies...)
			var seen attempts
			realStart := time.Now()
			status, err := call(t, context.Background(), clk, script,
				retryhttp.WithTryTimeout(5*time.Second), retryhttp.WithObserver(seen.observe))
			assert.Equal(t, tt.status, status)
			if tt.status == 0 {
				var rerr *retryhttp.Error
				require.ErrorAs(t, err, &rerr)
				var timeout interface{ Timeout() bool } // (*Error).Timeout is not built yet: ask its cause
				require.ErrorAs(t, rerr.Err, &timeout)
				assert.True(t, timeout.Timeout(), "a try timeout is a timeout")
				assert.Equal(t, retryhttp.Exhausted, rerr.Reason)
			} else {
				require.NoError(t, err)
			}
			var elapsed []time.Duration
			for _, a := range seen.get() {
				elapsed = append(elapsed, a.Elapsed)
			}
			assert.Equal(t, tt.elapsed, elapsed)
			assert.Equal(t, tt.gaps, gaps(script.Requests()))
			assert.Less(t, time.Since(realStart), time.Second, "no real wait")
		})
	}
}

// A reply in time is never cut by the try timeout, however long its body
// is read afterwards (R13).
func TestTransportTryTimeoutLeavesAnAnswerAlone(t *testing.T) {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Reply{Body: "the whole answer"}).WithClock(clk)
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk), retryhttp.WithTryTimeout(time.Second))}
	resp, err := client.Get("https://api.example.com/")
	require.NoError(t, err)
	defer resp.Body.Close()
	clk.Add(time.Hour) // the try timeout would have fired long ago
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "the whole answer", string(body))
	assert.Empty(t, clk.Waits())
}

// The caller gives up one second into a two-second wait: the transport
// returns Canceled at that instant, and the Budget gets the unused second
// back (R8, R9).
func TestTransportCancelDuringWait(t *testing.T) {
	clk := retryhttptest.NewClock()
	start := clk.Now()
	budget := retryhttp.NewBudget(10 * time.Second)
	ctx, cancel := context.WithCancel(retryhttp.WithBudget(context.Background(), budget))
	defer cancel()
	clk.AfterFunc(time.Second, cancel) // the user presses Stop
	script := retryhttptest.NewScript(retryhttptest.Status(503, "Retry-After", "2"))

	_, err := call(t, ctx, clk, script)
	var rerr *retryhttp.Error
	require.ErrorAs(t, err, &rerr)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, retryhttp.Canceled, rerr.Reason)
	assert.Equal(t, time.Second, rerr.Waited)
	assert.Equal(t, 503, rerr.Status)
	assert.Equal(t, time.Second, budget.Waited(), "the unused second was given back")
	assert.Equal(t, []time.Duration{2 * time.Second}, clk.Waits())
	assert.Equal(t, time.Second, clk.Since(start))
	assert.Equal(t, 1, script.Len(), "no second try")
}

// A context already cancelled before the wait: the transport does not wait,
// and nothing more is sent.
func TestTransportCancelBeforeWait(t *testing.T) {
	clk := retryhttptest.NewClock()
	ctx, cancel := context.WithCancel(context.Background())
	var seen attempts
	observe := func(ctx context.Context, a retryhttp.Attempt) {
		seen.observe(ctx, a)
		cancel() // as a UI would, on seeing "retrying"
	}
	script := retryhttptest.NewScript(retryhttptest.Status(503))
	_, err := call(t, ctx, clk, script, retryhttp.WithObserver(observe))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, clk.Waits())
	assert.Equal(t, 1, script.Len())
}

// A deadline on the Clock: a wait that does not fit is not taken (R7).
func TestTransportDeadlineOnClock(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		status  int
		waits   []time.Duration
		tries   int
	}{
		{"fits", 3 * time.Second, 200, []time.Duration{2 * time.Second}, 2},
		{"does not fit: the 503 at once", 2 * time.Second, 503, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := retryhttptest.NewClock()
			ctx, cancel := clk.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			script := retryhttptest.NewScript(retryhttptest.Status(503, "Retry-After", "2"), retryhttptest.Status(200))
			status, err := call(t, ctx, clk, script)
			require.NoError(t, err)
			assert.Equal(t, tt.status, status)
			assert.Equal(t, tt.waits, clk.Waits())
			assert.Equal(t, tt.tries, script.Len())
		})
	}
}

// A public-tier call that the server asks to wait longer than its Budget
// fails fast with ErrRateLimited, without waiting (R8).
func TestTransportBudgetFailsFast(t *testing.T) {
	for _, sig := range []retryhttptest.Signal{retryhttptest.RetryAfterSeconds, retryhttptest.RetryAfterMs, retryhttptest.RetryAfterDate} {
		t.Run(sig.String(), func(t *testing.T) {
			clk := retryhttptest.NewClock()
			ctx := retryhttp.WithBudget(context.Background(), retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
			script := retryhttptest.NewScript(retryhttptest.Status(429).Asks(sig, 30*time.Second))
			_, err := call(t, ctx, clk, script)
			var rerr *retryhttp.Error
			require.ErrorAs(t, err, &rerr)
			assert.ErrorIs(t, err, retryhttp.ErrRateLimited)
			assert.Equal(t, 30*time.Second, rerr.RetryAfter)
			assert.Empty(t, clk.Waits())
			assert.Equal(t, 1, script.Len())
		})
	}
}

// A stream cut mid-body is handed back as it is: the transport never
// retries once a body is the caller's (R6).
func TestTransportHandsBackACutStream(t *testing.T) {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(
		retryhttptest.Reply{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: "data: {\"delta\":\"Hel"}.Cut(nil),
		retryhttptest.Status(200))
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk))}
	resp, err := client.Get("https://api.example.com/v1/chat")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, "data: {\"delta\":\"Hel", string(body))
	assert.Equal(t, 1, script.Len())
}

// A request body that fails to read fails the try; without GetBody the
// transport cannot send it again (R10).
func TestTransportRequestBodyReadError(t *testing.T) {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript().WithClock(clk)
	body := io.NopCloser(io.MultiReader(strings.NewReader(`{"q":`), iotest.ErrReader(syscall.EPIPE)))
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat", body)
	_, err := retryhttp.New(script, retryhttp.WithClock(clk)).RoundTrip(req)
	var rerr *retryhttp.Error
	require.ErrorAs(t, err, &rerr)
	assert.ErrorIs(t, err, syscall.EPIPE)
	assert.Equal(t, retryhttp.NotReplayable, rerr.Reason)
	assert.Equal(t, []byte(`{"q":`), script.Requests()[0].Body)
	assert.Empty(t, clk.Waits())
}

// Many calls share one Transport, Script and Clock: run with -race. The one
// 503 is retried once, after exactly the backoff; every call succeeds.
func TestTransportConcurrentUse(t *testing.T) {
	const n = 32
	clk := retryhttptest.NewClock()
	start := clk.Now()
	script := retryhttptest.NewScript(retryhttptest.Status(503), retryhttptest.Status(200)).WithClock(clk)
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk), retryhttp.WithBackoff(noJitter),
		retryhttp.WithTryTimeout(time.Minute))}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get("https://api.example.com/")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = errors.New(resp.Status)
				}
			}
			errs <- err
			_ = script.Requests()
			_ = clk.Waits()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, n+1, script.Len())
	assert.Equal(t, []time.Duration{400 * ms}, clk.Waits())
	assert.Equal(t, 400*ms, clk.Since(start))
}
