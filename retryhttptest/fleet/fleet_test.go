package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/retryhttptest/fleet"
	"github.com/stretchr/testify/assert"
)

// run has every replica of f make n calls, one after the other, each from
// a goroutine of its own; it returns how many answered 200.
func run(f *fleet.Fleet, n int) int {
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for _, r := range f.Replicas {
		wg.Go(func() {
			for range n {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost,
					"https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o"}`))
				resp, err := r.Client.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						mu.Lock()
						ok++
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	return ok
}

// TestFleetPacesTogether: six replicas, one provider account of 10
// requests a second (a bucket of 1, OpenAI's headers): sharing one Store,
// they send about the provider's rate together, not six times it, and few
// requests are refused; each alone sends far more 429s.
func TestFleetPacesTogether(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 10, Size: 1}})
				cfg := fleet.Config{Replicas: 6, Base: func(int) http.RoundTripper { return p },
					Transport: []retryhttp.Option{retryhttp.WithMaxRetries(10)}}
				var f *fleet.Fleet
				if shared {
					f = fleet.New(cfg)
				} else { // six fleets of one: six Stores
					f = &fleet.Fleet{}
					for range 6 {
						cfg.Replicas = 1
						f.Replicas = append(f.Replicas, fleet.New(cfg).Replicas...)
					}
				}
				defer f.Close()
				assert.Equal(t, 60, run(f, 10))
				st := p.Stats()
				perSuccess := float64(st.Requests) / float64(st.Admitted)
				t.Logf("shared %v: %d requests for %d answers (%.2f a success)", shared, st.Requests, st.Admitted, perSuccess)
				if shared {
					assert.Less(t, perSuccess, 1.3, "the fleet paces together")
				} else {
					assert.Greater(t, perSuccess, 1.3, "each on its own: the others' sends are 429s")
				}
			})
		})
	}
}

// TestFleetCircuit: the provider down; two replicas' failures open the
// fleet's circuit, and every replica's calls fail at once with
// ErrUnavailable, the others having heard of it.
func TestFleetCircuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := retryhttptest.NewScript(retryhttptest.Status(503))
		f := fleet.New(fleet.Config{Replicas: 4, Base: func(int) http.RoundTripper { return script },
			Cooldown:  []retryhttp.CooldownOption{retryhttp.WithCircuit(retryhttp.Circuit{Failures: 3, Open: time.Second})},
			Transport: []retryhttp.Option{retryhttp.WithMaxRetries(0)}})
		defer f.Close()
		run(f, 2)
		sent := script.Len()
		for i, r := range f.Replicas {
			_, err := r.Client.Get("https://api.openai.com/v1/models")
			assert.True(t, errors.Is(err, retryhttp.ErrUnavailable), "replica %d: %v", i, err)
		}
		assert.Equal(t, sent, script.Len(), "nothing sent while open")
		assert.LessOrEqual(t, sent, 3+3, "three failures opened the row, and the other replicas each had a call out at most")
	})
}
