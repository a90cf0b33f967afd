package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The circuit (R25), on the kit's Clock: what opens it, what a call meets
// while it is open, the probe, and what it logs.

var (
	down503 = retryhttptest.Status(503)
	reset   = retryhttptest.Fail(syscall.ECONNRESET)
	ok200   = retryhttptest.Status(200)
)

// circuitRig is a Transport with a Cooldown of circuit {3, 1 s} over a
// Script, on the kit's Clock.
type circuitRig struct {
	clk    *retryhttptest.Clock
	script *retryhttptest.Script
	cd     *Cooldown
	tr     *Transport
}

func newCircuitRig(replies []retryhttptest.Reply, opts ...Option) circuitRig {
	clk := newClock()
	script := retryhttptest.NewScript(replies...).WithClock(clk)
	cd := NewCooldown(nil, WithCircuit(Circuit{Failures: 3, Open: time.Second}))
	opts = append([]Option{WithClock(clk), WithCooldown(cd), WithBackoff(noJitter)}, opts...)
	return circuitRig{clk: clk, script: script, cd: cd, tr: New(script, opts...)}
}

func (r circuitRig) do(ctx context.Context) (*http.Response, error) {
	resp, err := r.tr.RoundTrip(getReq(ctx))
	if resp != nil {
		resp.Body.Close()
	}
	return resp, err
}

// TestCircuitOpens: Failures failed tries in a row open the key's circuit;
// the call whose failure opened it ends as when its retries run out (its
// last response handed back); every call after fails at once, sending
// nothing, sleeping nothing, charged nothing, with ErrUnavailable.
func TestCircuitOpens(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply retryhttptest.Reply
	}{{"503s", down503}, {"connections reset", reset}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCircuitRig([]retryhttptest.Reply{tc.reply}, WithMaxRetries(10))
			resp, err := r.do(context.Background())
			assert.Equal(t, 3, r.script.Len(), "three tries, then the circuit opened: no more")
			assert.Equal(t, []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}, r.clk.Waits())
			if tc.reply.Err == nil {
				require.NoError(t, err, "the last response is handed back, as when the retries run out")
				assert.Equal(t, 503, resp.StatusCode)
			} else {
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, Unavailable, e.Reason)
				assert.ErrorIs(t, err, ErrUnavailable)
				assert.ErrorIs(t, err, syscall.ECONNRESET, "the last error is the cause")
			}
			assert.True(t, r.cd.Down(origin))

			b := NewBudget(PublicTierMaxWait)
			_, err = r.do(WithBudget(context.Background(), b))
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, Error{Tries: 0, Reason: Unavailable, Err: ErrUnavailable}, *e)
			assert.ErrorIs(t, err, ErrUnavailable)
			assert.Equal(t, 3, r.script.Len(), "nothing sent")
			assert.Len(t, r.clk.Waits(), 2, "nothing slept")
			assert.Zero(t, b.Waited(), "nothing charged")
			assert.Same(t, e, b.Err(), "Budget.Err reports it (R20)")
		})
	}
}

// TestCircuitSignsOfLife: a success, a 4xx, a 429 and Google's 504
// DEADLINE_EXCEEDED end the row; the caller's own cancel is no news; a
// Permanent transport error is no answer.
func TestCircuitSignsOfLife(t *testing.T) {
	deadline := retryhttptest.Reply{Status: 504, Header: http.Header{"Content-Type": {"application/json"}},
		Body: `{"error":{"code":504,"status":"DEADLINE_EXCEEDED"}}`}
	for _, tc := range []struct {
		name string
		life retryhttptest.Reply
		open bool
	}{
		{"a success", ok200, false},
		{"a 404", retryhttptest.Status(404), false},
		{"a 429", retryhttptest.Status(429, "Retry-After-Ms", "1"), false},
		{"Google's 504 DEADLINE_EXCEEDED", deadline, false},
		{"a 501 (Permanent)", retryhttptest.Status(501), false},
		{"another 503", down503, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCircuitRig([]retryhttptest.Reply{down503, down503, tc.life, down503, down503, ok200}, WithMaxRetries(0))
			for range 5 {
				_, _ = r.do(context.Background())
			}
			assert.Equal(t, tc.open, r.cd.Down(origin), "two failures, %s, two more", tc.name)
		})
	}
	t.Run("the caller's cancel", func(t *testing.T) {
		r := newCircuitRig([]retryhttptest.Reply{down503}, WithMaxRetries(0))
		_, _ = r.do(context.Background())
		_, _ = r.do(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := r.do(ctx)
		require.ErrorIs(t, err, context.Canceled)
		assert.False(t, r.cd.Down(origin), "no news")
		_, _ = r.do(context.Background())
		assert.True(t, r.cd.Down(origin), "the row went on: three failures")
	})
}

// TestCircuitProbe: once Open has passed, the next try is the probe, and
// every other call is refused while it is out; its sign of life closes the
// circuit, its failure opens it for Open again, and a probe whose call
// ends without an answer lets the next try probe.
func TestCircuitProbe(t *testing.T) {
	r := newCircuitRig([]retryhttptest.Reply{down503, down503, down503, down503, retryhttptest.Hang(), ok200}, WithMaxRetries(0))
	for range 3 {
		_, _ = r.do(context.Background())
	}
	require.True(t, r.cd.Down(origin))
	r.clk.Add(time.Second)
	resp, err := r.do(context.Background())
	require.NoError(t, err, "the probe goes")
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, 4, r.script.Len())
	_, err = r.do(context.Background())
	assert.ErrorIs(t, err, ErrUnavailable, "a failed probe opens it again for Open")
	r.clk.Add(time.Second)

	// The probe hangs; the calls meanwhile are refused, none sent.
	ctx, cancel := context.WithCancel(context.Background())
	probed := make(chan error, 1)
	go func() { _, err := r.do(ctx); probed <- err }()
	require.Eventually(t, func() bool { return r.script.Len() == 5 }, time.Second, time.Millisecond)
	for range 3 {
		_, err = r.do(context.Background())
		assert.ErrorIs(t, err, ErrUnavailable, "the probe is out")
	}
	cancel()
	require.ErrorIs(t, <-probed, context.Canceled)
	assert.Equal(t, 5, r.script.Len())

	resp, err = r.do(context.Background())
	require.NoError(t, err, "the probe's call ended with no answer: the next try probes")
	assert.Equal(t, 200, resp.StatusCode)
	assert.False(t, r.cd.Down(origin), "its sign of life closed the circuit")
	_, err = r.do(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 7, r.script.Len())
}

// TestCircuitLogs: one Warn when the key opens, one Info when it closes,
// never a line per refused call; a key the key function made is written as
// a hash of it.
func TestCircuitLogs(t *testing.T) {
	log, logs := logSink()
	clk := newClock()
	script := retryhttptest.NewScript(down503, down503, down503, ok200).WithClock(clk)
	cd := NewCooldown(func(*http.Request) string { return "tenant-sk-secret" }, WithCircuit(Circuit{Failures: 3}))
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0), WithLogger(log))
	for range 20 {
		if resp, err := tr.RoundTrip(getReq(context.Background())); err == nil {
			resp.Body.Close()
		}
	}
	clk.Add(time.Second)
	resp, err := tr.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	opened, closed := logs.FilterMessage(msgCircuitOpen).All(), logs.FilterMessage(msgCircuitClosed).All()
	require.Len(t, opened, 1)
	require.Len(t, closed, 1)
	assert.Equal(t, "warn", opened[0].Level.String())
	assert.Equal(t, "info", closed[0].Level.String())
	assert.Equal(t, int64(3), opened[0].ContextMap()["failures"])
	assert.Regexp(t, `^sha256:[0-9a-f]{16}$`, opened[0].ContextMap()["key"])
	assert.Equal(t, int64(1000), opened[0].ContextMap()["open_ms"])
	assert.Equal(t, int64(1000), closed[0].ContextMap()["down_ms"])
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if v, ok := v.(string); ok {
				assert.NotContains(t, v, "secret", "%s: the caller's key is never logged as it is (%s)", e.Message, k)
			}
		}
	}
	assert.Len(t, logs.FilterMessage(msgGivingUp).All(), 1, "the three failed calls' give-ups in one second: one entry (sampled); none per refused call")
}

// TestCircuitObserved: the Observer's Attempt says Unavailable on the try
// whose retry the circuit stopped.
func TestCircuitObserved(t *testing.T) {
	var obs ttAttempts
	r := newCircuitRig([]retryhttptest.Reply{down503}, WithMaxRetries(5), WithObserver(obs.observe))
	_, _ = r.do(context.Background())
	got := obs.list()
	require.Len(t, got, 3)
	assert.Equal(t, []Outcome{Retrying, Retrying, Unavailable}, []Outcome{got[0].Outcome, got[1].Outcome, got[2].Outcome})
}

// TestWithoutCircuit: without WithCircuit, a down provider is retried as
// R2 to R9 say, whatever the Cooldown.
func TestWithoutCircuit(t *testing.T) {
	clk := newClock()
	script := retryhttptest.NewScript(down503).WithClock(clk)
	cd := NewCooldown(nil)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(2))
	for range 4 {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 12, script.Len())
	assert.False(t, cd.Down(origin))
}

// TestCircuitConcurrent: calls of many goroutines through an outage and
// its end: every call either fails with ErrUnavailable or ends as R9 says,
// and after Open exactly one probe goes while the provider is still down.
func TestCircuitConcurrent(t *testing.T) {
	r := newCircuitRig([]retryhttptest.Reply{down503}, WithMaxRetries(0))
	for range 3 {
		_, _ = r.do(context.Background())
	}
	r.clk.Add(time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	unavailable := 0
	for range 16 {
		wg.Go(func() {
			_, err := r.do(context.Background())
			if errors.Is(err, ErrUnavailable) {
				mu.Lock()
				unavailable++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 4, r.script.Len(), "one probe")
	assert.Equal(t, 15, unavailable)
}

// TestWithCircuitDefaults: a Circuit's zero or negative fields take the
// defaults, and a field that is set is kept as it is, each on both sides
// of 0.
func TestWithCircuitDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want Circuit
	}{
		{Circuit{}, Circuit{Failures: store.DefaultFailures, Open: store.DefaultOpen}},
		{Circuit{Failures: -1, Open: -time.Second}, Circuit{Failures: store.DefaultFailures, Open: store.DefaultOpen}},
		{Circuit{Failures: 1, Open: time.Microsecond}, Circuit{Failures: 1, Open: time.Microsecond}},
		{Circuit{Failures: 9, Open: time.Minute}, Circuit{Failures: 9, Open: time.Minute}},
	} {
		var cfg cooldownConfig
		WithCircuit(tc.in)(&cfg)
		require.NotNil(t, cfg.circuit)
		assert.Equal(t, tc.want, Circuit{Failures: cfg.circuit.Failures, Open: cfg.circuit.Open}, "WithCircuit(%+v)", tc.in)
	}
}

// BenchmarkRefused is a call refused by an open circuit (R25): it sends
// nothing and sleeps nothing.
func BenchmarkRefused(b *testing.B) {
	clk := newClock()
	script := retryhttptest.NewScript(down503, down503, down503).WithClock(clk)
	cd := NewCooldown(nil, WithCircuit(Circuit{Failures: 3, Open: time.Hour}))
	b.Cleanup(func() { _ = cd.Close() })
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	for range 3 {
		if resp, _ := tr.RoundTrip(getReq(context.Background())); resp != nil {
			resp.Body.Close()
		}
	}
	if !cd.Down(origin) {
		b.Fatal("the circuit did not open")
	}
	req := getReq(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrUnavailable) {
			b.Fatalf("RoundTrip: %v, want ErrUnavailable", err)
		}
	}
}

// TestCircuitDownComesBack: Down says whether a call would be refused now:
// once Open has passed with no probe out it is false (an app that routes
// by Down probes, and comes back to its provider), and the next call is
// the probe.
func TestCircuitDownComesBack(t *testing.T) {
	r := newCircuitRig([]retryhttptest.Reply{down503, down503, down503, ok200}, WithMaxRetries(0))
	for range 3 {
		_, _ = r.do(context.Background())
	}
	require.True(t, r.cd.Down(origin))
	r.clk.Add(time.Second - time.Nanosecond)
	assert.True(t, r.cd.Down(origin), "a nanosecond before Open has passed")
	r.clk.Add(time.Hour)
	assert.False(t, r.cd.Down(origin), "an hour after, no probe out: down no more")
	_, err := r.do(context.Background())
	require.NoError(t, err, "the probe")
	assert.False(t, r.cd.Down(origin))
}

// TestCircuitKeysGo: keys whose circuit opened go once their Open has
// passed, as other quiet keys do: after 4,096 of them (a circuit per
// model, per tenant), a new key is still watched, and its Retry-After: 20
// holds.
func TestCircuitKeysGo(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil, WithCircuit(Circuit{Failures: 1, Open: time.Second}))
	script := retryhttptest.NewScript(down503).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	for i := range maxCoolingKeys {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, fmt.Sprintf("https://h%d.example.com/", i), nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	require.Equal(t, maxCoolingKeys, cd.size())
	clk.Add(time.Second + pace.IdleAfter)
	const late = "https://late.example.com"
	held := New(retryhttptest.NewScript(reply(429, "Retry-After", "20")).WithClock(clk), WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	resp, err := held.RoundTrip(newRequest(t, context.Background(), http.MethodGet, late+"/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, clk.Now().Add(20*time.Second), cd.Until(late), "the new key holds")
}

// TestCircuitRefusesTheSendsWaiting: calls already waiting for their paced
// slots when the circuit opens are refused at once, not sent to a
// provider known to be down: three failures, then nothing.
func TestCircuitRefusesTheSendsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int32
		base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
			sent.Add(1)
			return respond(503, ""), nil
		})
		cd := NewCooldown(nil, WithCircuit(Circuit{Failures: 3, Open: time.Minute}))
		tr := New(base, WithCooldown(cd), WithMaxRetries(0))
		paceAt(cd, time.Now(), 100*time.Millisecond)
		start := time.Now()
		var refused atomic.Int32
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(getReq(context.Background()))
				if err == nil {
					resp.Body.Close()
				} else if errors.Is(err, ErrUnavailable) {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int32(3), sent.Load(), "three sends: the third failure opened it")
		assert.Equal(t, int32(7), refused.Load())
		assert.Less(t, time.Since(start), 300*time.Millisecond, "refused as it opened, not at their slots")
	})
}

// TestCircuitOwnProbeOut: a process knows its own probe is out, however
// long its answer takes (an LLM's may take longer than the probe's lease):
// no second probe goes from it.
func TestCircuitOwnProbeOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int32
		base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
			if sent.Add(1) == 1 {
				return respond(503, ""), nil
			}
			time.Sleep(40 * time.Second) // the probe's answer: 40 s
			return respond(200, ""), nil
		})
		cd := NewCooldown(nil, WithCircuit(Circuit{Failures: 1, Open: time.Second}))
		tr := New(base, WithCooldown(cd), WithMaxRetries(0))
		resp, _ := tr.RoundTrip(getReq(context.Background()))
		resp.Body.Close()
		time.Sleep(time.Second)
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := tr.RoundTrip(getReq(context.Background()))
			if assert.NoError(t, err, "the probe") {
				resp.Body.Close()
			}
		}()
		time.Sleep(35 * time.Second) // past the lease, the probe still out
		_, err := tr.RoundTrip(getReq(context.Background()))
		assert.ErrorIs(t, err, ErrUnavailable, "refused: the process's probe is out")
		<-done
		assert.Equal(t, int32(2), sent.Load())
		resp, err = tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err, "answered: closed")
		resp.Body.Close()
	})
}

// TestCircuitRefusedRetry: a retry refused by a circuit that opened during
// its wait ends as when its retries run out: its last 503 handed back
// whole, and the give-up entry written (R14).
func TestCircuitRefusedRetry(t *testing.T) {
	clk := newClock()
	log, logs := logSink()
	cd := NewCooldown(nil, WithCircuit(Circuit{Failures: 2, Open: time.Minute}))
	script := retryhttptest.NewScript(reply(503)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithBackoff(noJitter), WithLogger(log))
	other := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	clk.AfterFunc(100*time.Millisecond, func() { // another call fails during the first one's wait: open
		resp, err := other.RoundTrip(getReq(context.Background()))
		if err == nil {
			resp.Body.Close()
		}
	})
	resp, err := tr.RoundTrip(getReq(context.Background()))
	require.NoError(t, err, "handed back, as when the retries run out")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, http.StatusText(http.StatusServiceUnavailable), string(body), "whole")
	assert.Equal(t, 2, script.Len(), "the retry was not sent")
	gaveUp := logs.FilterMessage(msgGivingUp).All()
	require.Len(t, gaveUp, 1)
	assert.Equal(t, "unavailable", gaveUp[0].ContextMap()["reason"])
}

// TestCircuitLogsTheModel: a key the library made (KeyByModel: origin and
// model) is logged as it is, on the circuit's lines and on the retry's and
// the hold's; one the caller's key function made, as a hash of it.
func TestCircuitLogsTheModel(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[]}`)
	for _, tc := range []struct {
		name string
		key  func(*http.Request) string
		want func(string) bool
	}{
		{"KeyByModel", KeyByModel, func(k string) bool { return k == "https://api.example.com/gpt-4o" }},
		{"a caller's key function", func(r *http.Request) string { return "tenant-sk-123" },
			func(k string) bool { return strings.HasPrefix(k, "sha256:") && !strings.Contains(k, "sk-123") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			log, logs := logSink()
			cd := NewCooldown(tc.key, WithCircuit(Circuit{Failures: 2, Open: time.Minute}))
			script := retryhttptest.NewScript(reply(429, "Retry-After", "1"), reply(503), reply(503)).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd), WithBackoff(noJitter), WithLogger(log))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, origin+"/v1/chat/completions", body))
			if err == nil {
				resp.Body.Close()
			}
			for _, msg := range []string{msgRetrying, msgCircuitOpen} {
				entries := logs.FilterMessage(msg).All()
				require.NotEmpty(t, entries, msg)
				for _, e := range entries {
					k, _ := e.ContextMap()["key"].(string)
					assert.True(t, tc.want(k), "%s: key %q", msg, k)
				}
			}
		})
	}
}

// countingStore counts the Applies that reach a Store.
type countingStore struct {
	store.Store
	applies atomic.Int64
}

func (s *countingStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	s.applies.Add(1)
	return s.Store.Apply(ctx, key, ops)
}

// TestRefusedCallsCostNoRoundTrip: while the process knows a key is held
// past what a call can wait, or its circuit open, a call refused on that
// knowledge costs its Store nothing (a fail-fast loop against a held model
// made one round trip a call).
func TestRefusedCallsCostNoRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply retryhttptest.Reply
		want  error
	}{
		{"held", reply(429, "Retry-After", "60"), ErrRateLimited},
		{"open", reply(503), ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			cs := &countingStore{Store: store.NewLocal(clk.Now)}
			cd := NewCooldown(nil, WithStore(cs), WithCircuit(Circuit{Failures: 1, Open: time.Minute}))
			cd.setProcess(1)
			other := NewCooldown(nil, WithStore(cs), WithCircuit(Circuit{Failures: 1, Open: time.Minute}))
			other.setProcess(2)
			for _, c := range []*Cooldown{other, cd} { // two processes: the fleet's circuit opens
				tr := New(retryhttptest.NewScript(tc.reply).WithClock(clk), WithClock(clk), WithCooldown(c), WithMaxRetries(0))
				resp, err := tr.RoundTrip(getReq(context.Background()))
				if err == nil {
					resp.Body.Close()
				}
			}
			script := retryhttptest.NewScript(ok200).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd))
			before := cs.applies.Load()
			for range 1000 {
				_, err := tr.RoundTrip(getReq(WithBudget(context.Background(), NewBudget(PublicTierMaxWait))))
				require.ErrorIs(t, err, tc.want)
			}
			assert.Zero(t, cs.applies.Load()-before, "no round trip for a refused call")
			assert.Zero(t, script.Len())
		})
	}
}

// The circuit of a fleet (R25): K Cooldowns of one process over one
// store.Local, as K replicas over one Redis (retryredis's tests run the
// same on a real one).

type replica struct {
	script *retryhttptest.Script
	cd     *Cooldown
	tr     *Transport
}

func newFleet(t *testing.T, clk *retryhttptest.Clock, s store.Store, replies ...[]retryhttptest.Reply) []replica {
	t.Helper()
	out := make([]replica, len(replies))
	for i, rs := range replies {
		script := retryhttptest.NewScript(rs...).WithClock(clk)
		cd := NewCooldown(nil, WithStore(s), WithCircuit(Circuit{Failures: 3, Open: time.Second}))
		t.Cleanup(func() { _ = cd.Close() })
		out[i] = replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))}
	}
	return out
}

func (r replica) do() error {
	resp, err := r.tr.RoundTrip(getReq(context.Background()))
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

// TestCircuitFleetOpensTogether: two replicas' failures open the fleet's
// circuit, and the third, which sent nothing, refuses its calls too, having
// heard of it; after Open, one probe goes for the whole fleet.
func TestCircuitFleetOpensTogether(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{down503}, []retryhttptest.Reply{down503},
		[]retryhttptest.Reply{down503})
	_ = f[0].do()
	_ = f[1].do()
	_ = f[0].do()
	for i, r := range f {
		assert.True(t, r.cd.Down(origin), "replica %d", i)
		assert.ErrorIs(t, r.do(), ErrUnavailable, "replica %d", i)
	}
	assert.Zero(t, f[2].script.Len(), "the third sent nothing")
	clk.Add(time.Second)
	for range 3 {
		for _, r := range f {
			_ = r.do()
		}
	}
	assert.Equal(t, 4, f[0].script.Len()+f[1].script.Len()+f[2].script.Len(), "three failures, then one probe for the fleet")
}

// TestCircuitFleetBadReplica: one replica whose own network fails never
// refuses the others' calls; its own row refuses its own.
func TestCircuitFleetBadReplica(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{reset}, []retryhttptest.Reply{ok200},
		[]retryhttptest.Reply{ok200})
	for range 10 {
		_ = f[0].do()
	}
	assert.Equal(t, 3, f[0].script.Len(), "the bad replica's own row opened after three")
	assert.ErrorIs(t, f[0].do(), ErrUnavailable)
	for i := 1; i < 3; i++ {
		for range 5 {
			require.NoError(t, f[i].do(), "replica %d", i)
		}
		assert.False(t, f[i].cd.Down(origin), "replica %d", i)
	}
	clk.Add(time.Second)
	assert.ErrorIs(t, f[0].do(), syscall.ECONNRESET, "its own probe goes, and fails")
	assert.Equal(t, 4, f[0].script.Len())
}

// TestCircuitStoreFailing: with the Store failing, the circuit goes on in
// the process, on its own tries.
func TestCircuitStoreFailing(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, &failingStore{}, []retryhttptest.Reply{down503})
	for range 6 {
		_ = f[0].do()
	}
	assert.Equal(t, 3, f[0].script.Len())
	err := f[0].do()
	assert.True(t, errors.Is(err, ErrUnavailable), "%v", err)
}

// TestCircuitFleetOwnRowEnds: a replica's own row ends when it hears the
// fleet's circuit open (one probe for the fleet): its failures before that
// do not count again once the fleet's circuit closes, so two more of its
// own failures do not open its own row (three would).
func TestCircuitFleetOwnRowEnds(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now),
		[]retryhttptest.Reply{down503, down503, down503, ok200},
		[]retryhttptest.Reply{down503, down503, ok200})
	a, b := f[0], f[1]
	_ = b.do()
	_ = b.do()
	_ = a.do() // the fleet's third failure, of two replicas: it opens; a's own row had one
	require.True(t, a.cd.Down(origin))
	clk.Add(time.Second)
	require.NoError(t, b.do(), "b's probe, for the fleet")
	require.False(t, a.cd.Down(origin), "a heard the fleet's circuit close")
	_ = a.do()
	_ = a.do()
	assert.False(t, a.cd.Down(origin), "two failures of a's own since: its own row is not open")
	assert.NoError(t, a.do(), "a's next call goes")
	assert.Equal(t, 4, a.script.Len())
}

// processStore is a Store of a process of its own: every Cooldown given one
// value is one process (processOf), whatever backend it shares.
type processStore struct{ store.Store }

// TestCircuitFleetHealthyBlip: one replica's own network fails while the
// others are served; one 503 blip of a healthy replica then does not open
// the fleet's circuit: the healthy replicas' signs of life ended each row
// the bad one began (its first failure is news to every replica, which
// watches the key until its row is empty).
func TestCircuitFleetHealthyBlip(t *testing.T) {
	clk := newClock()
	blip := []retryhttptest.Reply{ok200, ok200, ok200, down503, ok200}
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{reset}, blip, []retryhttptest.Reply{ok200})
	a, b, c := f[0], f[1], f[2]
	for range 3 {
		_ = a.do()
		require.NoError(t, b.do())
		require.NoError(t, c.do())
	}
	require.ErrorIs(t, a.do(), ErrUnavailable, "the bad replica's own row opened")
	_ = b.do() // b's blip: a 503, handed back
	require.Equal(t, 4, b.script.Len())
	for i := range 20 {
		require.NoError(t, b.do(), "b's call %d", i)
		require.NoError(t, c.do(), "c's call %d", i)
	}
	assert.False(t, b.cd.Down(origin))
	assert.False(t, c.cd.Down(origin))
}

// TestCircuitFleetCountsProcesses: the fleet's row counts processes, not
// Cooldowns. Two Cooldowns of one process whose network fails are one
// process: their failures never refuse another's calls. And a replica
// that crash-loops (a new process each start, each failing) is broken up
// by the healthy replica's signs of life between its starts.
func TestCircuitFleetCountsProcesses(t *testing.T) {
	circuit := WithCircuit(Circuit{Failures: 3, Open: time.Second})
	member := func(clk *retryhttptest.Clock, s store.Store, r retryhttptest.Reply) replica {
		script := retryhttptest.NewScript(r).WithClock(clk)
		cd := NewCooldown(nil, WithStore(s), circuit)
		t.Cleanup(func() { _ = cd.Close() })
		return replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))}
	}
	t.Run("two Cooldowns of one process", func(t *testing.T) {
		clk := newClock()
		local := store.NewLocal(clk.Now)
		p := &processStore{local}
		p1, p2 := member(clk, p, reset), member(clk, p, reset)
		q := member(clk, &processStore{local}, ok200)
		for range 3 {
			_ = p1.do()
			_ = p2.do()
		}
		for range 5 {
			require.NoError(t, q.do(), "one process's failures refuse nobody else")
		}
		assert.False(t, q.cd.Down(origin))
	})
	t.Run("a crash loop", func(t *testing.T) {
		clk := newClock()
		local := store.NewLocal(clk.Now)
		q := member(clk, &processStore{local}, ok200)
		for life := range 4 {
			bad := member(clk, &processStore{local}, reset) // a new process
			_ = bad.do()
			_ = bad.do()
			_ = bad.cd.Close()
			require.NoError(t, q.do(), "life %d: the healthy replica's call goes, and ends the row", life)
		}
		assert.False(t, q.cd.Down(origin))
	})
}

// TestCircuitFleetRowSpansTime: failures in the fleet's row are in a row:
// three failures 6 s apart, of two replicas, with a third replica's 40
// successes between each, never open the circuit, the keys looked over
// (swept) between them as they are every second.
func TestCircuitFleetRowSpansTime(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{down503}, []retryhttptest.Reply{down503},
		[]retryhttptest.Reply{ok200})
	a, b, c := f[0], f[1], f[2]
	sweep := func() {
		for _, r := range f {
			r.cd.sweepIdle()
		}
	}
	for _, r := range []replica{a, b, a} {
		_ = r.do()
		for i := range 40 {
			require.NoError(t, c.do(), "success %d", i)
		}
		clk.Add(6 * time.Second)
		sweep()
	}
	assert.False(t, c.cd.Down(origin))
	assert.False(t, a.cd.Down(origin))
	assert.NoError(t, c.do())
}

// loseAliveStore is a Store that fails the first Apply that carries a sign
// of life, as a Redis that times out once.
type loseAliveStore struct {
	store.Store
	lost atomic.Int32
}

func (s *loseAliveStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	for _, op := range ops {
		if op.Kind == store.OpAlive && s.lost.CompareAndSwap(0, 1) {
			return store.State{}, errors.New("timeout")
		}
	}
	return s.Store.Apply(ctx, key, ops)
}

// TestCircuitFleetProbeAnswerLost: the probe's sign of life that its
// Store did not apply goes with the next op of the key: the prober's next
// call goes and closes the fleet's circuit, and the other replica's call
// goes after it, not a lease later.
func TestCircuitFleetProbeAnswerLost(t *testing.T) {
	clk := newClock()
	s := &loseAliveStore{Store: store.NewLocal(clk.Now)}
	f := newFleet(t, clk, nil, []retryhttptest.Reply{down503, down503, ok200}, []retryhttptest.Reply{down503, ok200})
	for i := range f {
		f[i] = replicaOn(t, clk, s, f[i].script)
	}
	a, b := f[0], f[1]
	_ = a.do()
	_ = b.do()
	_ = a.do()
	require.True(t, b.cd.Down(origin), "open")
	clk.Add(time.Second)
	require.NoError(t, a.do(), "a's probe: a sign of life, which the Store does not apply")
	require.Equal(t, int32(1), s.lost.Load())
	require.NoError(t, a.do(), "a's next call goes, and brings the sign of life")
	require.NoError(t, b.do(), "b's goes too: the fleet's circuit closed")
	assert.Equal(t, 2, b.script.Len())
}

// replicaOn is a replica on store s over script, with the fleet's circuit.
func replicaOn(t *testing.T, clk *retryhttptest.Clock, s store.Store, script *retryhttptest.Script) replica {
	t.Helper()
	cd := NewCooldown(nil, WithStore(s), WithCircuit(Circuit{Failures: 3, Open: time.Second}))
	cd.setProcess(rand.Uint64()) // a process each, whatever Store value they share
	t.Cleanup(func() { _ = cd.Close() })
	return replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))}
}

// TestCircuitFleetStoreStalledPastOpen: with the Store failing past Open,
// each replica sends one probe of its own, not a whole call's tries: the
// open circuit it heard of is still its state.
func TestCircuitFleetStoreStalledPastOpen(t *testing.T) {
	clk := newClock()
	clk.Add(777) // a real clock's nanoseconds
	fs := &flakyStore{Local: skewedLocal(clk, 1234567)}
	var rs []replica
	for range 3 {
		script := retryhttptest.NewScript(down503).WithClock(clk)
		cd := NewCooldown(nil, WithStore(fs), WithCircuit(Circuit{Failures: 3, Open: time.Second}))
		cd.setProcess(rand.Uint64())
		t.Cleanup(func() { _ = cd.Close() })
		rs = append(rs, replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(2), WithBackoff(Backoff{}))})
	}
	_ = rs[0].do() // three tries
	_ = rs[1].do() // and a second process's: open
	require.True(t, rs[2].cd.Down(origin))
	fs.down.Store(true)
	clk.Add(time.Second)
	for i, r := range rs {
		before := r.script.Len()
		_ = r.do()
		assert.Equal(t, 1, r.script.Len()-before, "replica %d: one probe", i)
		assert.ErrorIs(t, r.do(), ErrUnavailable, "replica %d: its probe failed: open again", i)
	}
}
