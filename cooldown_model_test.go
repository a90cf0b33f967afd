package retryhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Cooldown keyed by model (issue 32): it holds the model the provider
// limited and no other, and a call makes its key once, whatever its tries.

// TestCooldownByModelHoldsOneModel: against the kit's Provider with limits
// per model, a 429 for gpt-4o holds the next gpt-4o call until the
// provider has room, and none of gpt-4o-mini's, with KeyByModel as it is
// and wrapped in a function of one's own.
func TestCooldownByModelHoldsOneModel(t *testing.T) {
	for name, key := range map[string]func(*http.Request) string{
		"KeyByModel": KeyByModel,
		"wrapped":    ownKeyByModel,
	} {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Clock: clk, Models: map[string]retryhttptest.ModelLimits{
				"gpt-4o":      {Requests: retryhttptest.Limit{Rate: 0.1, Size: 1}}, // one at once, then one in 10 s
				"gpt-4o-mini": {Requests: retryhttptest.Limit{Rate: 10, Size: 10}},
			}})
			cd := NewCooldown(key)
			attempts := &ttAttempts{}
			tr := New(provider, WithClock(clk), WithCooldown(cd), WithMaxRetries(0), WithObserver(attempts.observe))
			call := func(model string) (status int, held time.Duration) {
				t.Helper()
				req := newRequest(t, context.Background(), http.MethodPost, openAIChat, []byte(`{"model":"`+model+`","messages":[]}`))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				all := attempts.list()
				return resp.StatusCode, all[len(all)-1].Held
			}

			status, _ := call("gpt-4o")
			require.Equal(t, 200, status)
			status, _ = call("gpt-4o")
			require.Equal(t, 429, status, "gpt-4o's bucket is spent")
			assert.False(t, cd.Until("https://api.openai.com/gpt-4o").IsZero(), "gpt-4o is held")
			assert.True(t, cd.Until("https://api.openai.com/gpt-4o-mini").IsZero(), "gpt-4o-mini is not")
			assert.True(t, cd.Until("https://api.openai.com").IsZero(), "nor the host")
			for range 5 {
				status, held := call("gpt-4o-mini")
				assert.Equal(t, 200, status)
				assert.Zero(t, held, "gpt-4o-mini is not held")
			}
			assert.Empty(t, clk.Waits(), "nothing waited yet")
			status, held := call("gpt-4o")
			assert.Equal(t, 200, status, "held until the provider has room, then admitted")
			assert.InDelta(t, 10*time.Second, held, float64(time.Second), "held for the provider's ask")
			assert.Equal(t, int64(1), provider.ModelStats("gpt-4o").Refused, "gpt-4o's one 429")
			assert.Equal(t, int64(0), provider.ModelStats("gpt-4o-mini").Refused)
			assert.Equal(t, int64(5), provider.ModelStats("gpt-4o-mini").Admitted)
		})
	}
}

// TestCooldownKeyRunsOncePerCall: a key function runs at most once per
// call, and not at all while nothing is watched and the call's answers arm
// nothing: on RoundTrip's fast path, before the first try, when some key
// is watched (the key it made is handed on to the call); else at the
// call's first need of its key (a failed try's hold, an answer that arms
// it). So once per call however many tries, not once per try.
func TestCooldownKeyRunsOncePerCall(t *testing.T) {
	ok, unavailable, limited := reply(200), reply(503), reply(429, "Retry-After", "2")
	observer := []Option{WithObserver(func(context.Context, Attempt) {})}
	for _, tc := range []struct {
		name    string
		watched string // "other" or "own": a key watched before the call
		rs      replies
		opts    []Option
		circuit bool
		want    int
	}{
		{"nothing watched: a success", "", replies{ok}, nil, false, 0},
		{"nothing watched: 503, 200", "", replies{unavailable, ok}, nil, false, 0},
		{"nothing watched: a 429 arms its key, 200", "", replies{limited, ok}, nil, false, 1},
		{"nothing watched: a circuit's failures arm it, 503, 503, 200", "", replies{unavailable, unavailable, ok}, nil, true, 1},
		{"another key watched: a success", "other", replies{ok}, nil, false, 1},
		{"another key watched: 503, 503, 200", "other", replies{unavailable, unavailable, ok}, nil, false, 1},
		{"another key watched: 429, 429, 200", "other", replies{limited, limited, ok}, nil, false, 1},
		{"its key held: 503, 200", "own", replies{unavailable, ok}, nil, false, 1},
		{"its key held, the slow path from the start: 429, 503, 200", "own", replies{limited, unavailable, ok}, observer, false, 1},
		{"another key watched, the slow path from the start: 503, 200", "other", replies{unavailable, ok}, observer, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			var opts []CooldownOption
			if tc.circuit {
				opts = append(opts, WithCircuit(Circuit{Failures: 5}))
			}
			cd := NewCooldown(func(r *http.Request) string { runs++; return r.URL.Host }, opts...)
			clk, script, tr := scripted(tc.rs, append([]Option{WithCooldown(cd)}, tc.opts...)...)
			switch tc.watched {
			case "other":
				holdFor(cd, "other.example.com", clk.Now(), time.Hour)
			case "own":
				holdFor(cd, "api.example.com", clk.Now(), time.Second)
			}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{}`)))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, len(tc.rs), script.Len(), "every try sent")
			assert.Equal(t, tc.want, runs, "key function runs in a call of %d tries", script.Len())
		})
	}
}

// TestKeyByModelReadsOncePerCall: a Cooldown given KeyByModel reads a
// call's body (GetBody's copy) at most once per call, and only while a key
// of the call's host is watched; the retries' own copies are not counted.
func TestKeyByModelReadsOncePerCall(t *testing.T) {
	ok, unavailable, limited := reply(200), reply(503), reply(429, "Retry-After", "2")
	for _, tc := range []struct {
		name    string
		watched string // a key watched before the call
		rs      replies
		want    int
	}{
		{"nothing watched: a success", "", replies{ok}, 0},
		{"nothing watched: 503, 503, 200", "", replies{unavailable, unavailable, ok}, 0},
		{"nothing watched: a 429 arms its key, 200", "", replies{limited, ok}, 1},
		{"another host watched: 429, 200", "https://other.example.com/gpt-4o", replies{limited, ok}, 1},
		{"another host watched: 503, 200", "https://other.example.com/gpt-4o", replies{unavailable, ok}, 0},
		{"another model watched: a success", "https://api.openai.com/o3", replies{ok}, 1},
		{"another model watched: 503, 503, 200", "https://api.openai.com/o3", replies{unavailable, unavailable, ok}, 1},
		{"the host's key watched: a success", "https://api.openai.com", replies{ok}, 1},
		{"its key held: 503, 200", "https://api.openai.com/gpt-4o", replies{unavailable, ok}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(KeyByModel)
			clk, script, tr := scripted(tc.rs, WithCooldown(cd))
			if tc.watched != "" {
				d := time.Hour
				if strings.HasSuffix(tc.watched, "/gpt-4o") && strings.Contains(tc.watched, "openai") {
					d = time.Second
				}
				holdFor(cd, tc.watched, clk.Now(), d)
			}
			req := newRequest(t, context.Background(), http.MethodPost, openAIChat, []byte(`{"model":"gpt-4o"}`))
			copies := 0
			getBody := req.GetBody
			req.GetBody = func() (io.ReadCloser, error) { copies++; return getBody() }
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			retries := script.Len() - 1
			assert.Equal(t, tc.want, copies-retries, "copies read for the key in a call of %d tries", script.Len())
		})
	}
}
