package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// R27: who goes first while a key's sends wait, through the Transport, in
// a testing/synctest bubble: a provider that states its limit, one request
// every 100 ms (OpenAI's headers), primed by one call, so that every send
// after it waits for its slot.

// prioritySend is one call of a scene: its name, when it starts after the
// priming call, and what its context carries.
type prioritySend struct {
	name     string
	at       time.Duration
	priority *Priority     // WithPriority's; nil: none
	budget   bool          // a public-tier Budget
	deadline time.Duration // 0: none
}

func (s prioritySend) ctx() (context.Context, context.CancelFunc) {
	ctx := context.Background()
	if s.priority != nil {
		ctx = WithPriority(ctx, *s.priority)
	}
	if s.budget {
		ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
	}
	if s.deadline > 0 {
		return context.WithTimeout(ctx, s.deadline)
	}
	return ctx, func() {}
}

// sceneResult is what a scene's calls did: the order the provider got
// them, and each call's error and when it ended, after the priming.
type sceneResult struct {
	order []string
	err   map[string]error
	ended map[string]time.Duration
}

// runScene primes a key one request per 100 ms, then makes sends' calls.
func runScene(t *testing.T, sends []prioritySend, opts ...Option) (res sceneResult) {
	synctest.Test(t, func(t *testing.T) {
		p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 10, Size: 1}})
		var mu sync.Mutex
		res.err, res.ended = map[string]error{}, map[string]time.Duration{}
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if name := r.Header.Get("X-Call"); name != "" {
				mu.Lock()
				res.order = append(res.order, name)
				mu.Unlock()
			}
			return p.RoundTrip(r)
		})
		tr := New(base, append([]Option{WithCooldown(NewCooldown(nil)), WithMaxRetries(0)}, opts...)...)
		call := func(ctx context.Context, name string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/chat", nil)
			require.NoError(t, err)
			req.Header.Set("X-Call", name)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				}
			}
			return err
		}
		require.NoError(t, call(context.Background(), "")) // its answer states the limit: the key is paced
		start := time.Now()
		var wg sync.WaitGroup
		for _, s := range sends {
			wg.Go(func() {
				time.Sleep(s.at)
				ctx, cancel := s.ctx()
				defer cancel()
				err := call(ctx, s.name)
				mu.Lock()
				res.err[s.name], res.ended[s.name] = err, time.Since(start)
				mu.Unlock()
			})
		}
		wg.Wait()
	})
	return res
}

func prio(p Priority) *Priority { return &p }

// at returns n sends named prefix1..prefixN, starting from 'from' a
// microsecond apart (so that they come in that order).
func sendsAt(prefix string, n int, from time.Duration, s prioritySend) []prioritySend {
	out := make([]prioritySend, n)
	for i := range out {
		out[i] = s
		out[i].name, out[i].at = prefix+string(rune('a'+i)), from+time.Duration(i)*time.Microsecond
	}
	return out
}

// TestPriorityOrder: the order the provider gets a scene's calls.
func TestPriorityOrder(t *testing.T) {
	bg, normal, interactive := prio(Background), prio(Normal), prio(Interactive)
	for _, tc := range []struct {
		name  string
		sends []prioritySend
		want  []string
	}{
		{"a person's call (its Budget) before the batch waiting",
			append(sendsAt("b", 3, 0, prioritySend{priority: bg}), prioritySend{name: "person", at: time.Millisecond, budget: true}),
			[]string{"person", "ba", "bb", "bc"}},
		{"with no Budget and no WithPriority a call is Normal: before Background, after Interactive",
			[]prioritySend{{name: "batch", priority: bg}, {name: "plain", at: time.Microsecond}, {name: "person", at: 2 * time.Microsecond, priority: interactive}},
			[]string{"person", "plain", "batch"}},
		{"WithPriority wins over a Budget",
			[]prioritySend{{name: "marked", budget: true, priority: bg}, {name: "plain", at: time.Microsecond}},
			[]string{"plain", "marked"}},
		{"one priority: the call that must end sooner first, then the order they came",
			[]prioritySend{{name: "none", priority: normal}, {name: "10s", at: time.Microsecond, deadline: 10 * time.Second},
				{name: "5s", at: 2 * time.Microsecond, deadline: 5 * time.Second}, {name: "later", at: 3 * time.Microsecond}},
			[]string{"5s", "10s", "none", "later"}},
		{"the tenth jump in a row over the batch gives its first its slot",
			append(sendsAt("b", 2, 0, prioritySend{priority: bg}), sendsAt("i", 12, time.Millisecond, prioritySend{priority: interactive})...),
			[]string{"ia", "ib", "ic", "id", "ie", "if", "ig", "ih", "ii", "ba", "ij", "ik", "il", "bb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runScene(t, tc.sends)
			assert.Equal(t, tc.want, res.order)
			for name, err := range res.err {
				assert.NoError(t, err, name)
			}
		})
	}
}

// TestPriorityPushedEndsAtOnce: a call whose slot is moved past its
// deadline by calls of a higher priority ends at once, OutOfTime and
// "busy", sending nothing, not at the end of a wait it could not finish.
func TestPriorityPushedEndsAtOnce(t *testing.T) {
	res := runScene(t, append([]prioritySend{
		{name: "first", priority: prio(Normal)},
		{name: "bounded", at: time.Microsecond, deadline: 250 * time.Millisecond}, // its slot at ~204 ms fits
	}, sendsAt("i", 2, time.Millisecond, prioritySend{priority: prio(Interactive)})...))
	var e *Error
	require.ErrorAs(t, res.err["bounded"], &e)
	assert.Equal(t, OutOfTime, e.Reason)
	assert.ErrorIs(t, res.err["bounded"], ErrRateLimited)
	assert.Equal(t, time.Millisecond+time.Microsecond, res.ended["bounded"], "ended when the second pushed it, not at its deadline")
	assert.NotContains(t, res.order, "bounded", "sent nothing")
	assert.Equal(t, []string{"ia", "ib", "first"}, res.order)
}

// TestPriorityVisible: the Attempt says each call's Priority (a Budget's
// Interactive, Normal, WithPriority's), and the hold's log entry too.
func TestPriorityVisible(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	var mu sync.Mutex
	got := map[string]Priority{}
	obs := WithObserver(func(ctx context.Context, a Attempt) {
		mu.Lock()
		defer mu.Unlock()
		got[a.URL] = a.Priority
	})
	synctest.Test(t, func(t *testing.T) {
		p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 1, Size: 1}})
		tr := New(p, WithCooldown(NewCooldown(nil)), WithMaxRetries(0), WithLogger(zap.New(core)), obs)
		for _, c := range []struct {
			path string
			ctx  context.Context
		}{
			{"/plain", context.Background()},
			{"/budget", WithBudget(context.Background(), NewBudget(PublicTierMaxWait))},
			{"/background", WithPriority(WithBudget(context.Background(), NewBudget(PublicTierMaxWait)), Background)},
		} {
			req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, "https://api.example.com"+c.path, nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
	})
	assert.Equal(t, map[string]Priority{"https://api.example.com/plain": Normal,
		"https://api.example.com/budget": Interactive, "https://api.example.com/background": Background}, got)
	var prios []string
	for _, e := range logs.FilterMessage(msgHolding).All() {
		prios = append(prios, e.ContextMap()["priority"].(string))
	}
	assert.Equal(t, []string{"interactive", "background"}, prios, "each wait of a second for its slot logged, with its priority")
}

// TestPriorityString: each Priority's name, and what is out of range.
func TestPriorityString(t *testing.T) {
	for p, want := range map[Priority]string{Background: "background", Normal: "normal", Interactive: "interactive", -9: "background", 7: "interactive"} {
		assert.Equal(t, want, p.String())
	}
	assert.Equal(t, Interactive, priorityOf(WithPriority(context.Background(), 100), false), "clamped")
}

// TestStatedLimitPaces: a fan-out of first tries on a key whose limit a
// success stated (100 a second, a bucket of 10) sends what the limit lets
// through and paces the rest: no 429, every call answered. On a key whose
// provider states nothing (Retry-After alone), the same fan-out is as it
// was: the key is not watched after the success (R16), and the fan-out
// learns the limit from its 429s.
func TestStatedLimitPaces(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect retryhttptest.Dialect
		watched int
		storms  bool
	}{
		{"a stated limit", retryhttptest.OpenAIDialect, 1, false},
		{"no limit stated", retryhttptest.RetryAfterDialect, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: tc.dialect,
					Requests: retryhttptest.Limit{Rate: 100, Size: 10}, Latency: 50 * time.Millisecond})
				cd := NewCooldown(nil)
				tr := New(p, WithCooldown(cd), WithMaxRetries(0))
				get := func() int {
					req, err := http.NewRequest(http.MethodGet, "https://api.example.com/v1/chat", nil)
					require.NoError(t, err)
					resp, err := tr.RoundTrip(req)
					require.NoError(t, err)
					resp.Body.Close()
					return resp.StatusCode
				}
				require.Equal(t, http.StatusOK, get())
				assert.Equal(t, tc.watched, cd.size(), "watched after one success")
				var mu sync.Mutex
				var statuses []int
				var wg sync.WaitGroup
				for range 200 {
					wg.Go(func() {
						s := get()
						mu.Lock()
						statuses = append(statuses, s)
						mu.Unlock()
					})
				}
				wg.Wait()
				refused := p.Stats().Refused
				if tc.storms {
					assert.Positive(t, refused, "learned from a 429, as before")
					return
				}
				assert.Zero(t, refused, "no 429")
				assert.Equal(t, 200, len(slices.DeleteFunc(statuses, func(s int) bool { return s != http.StatusOK })))
			})
		})
	}
}
