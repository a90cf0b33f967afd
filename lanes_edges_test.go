package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
)

// TestIsIdleEdges: a key goes when it has nothing left to say, each rule
// on both sides of pace.IdleAfter: a failure in its circuit's row, a limit
// on a lane.
func TestIsIdleEdges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	just := now.Add(-pace.IdleAfter)                     // IdleAfter ago: nothing left to say
	recent := now.Add(-pace.IdleAfter + time.Nanosecond) // a nanosecond later: still something
	for _, tc := range []struct {
		name string
		r    store.Record
		idle bool
	}{
		{"nothing", store.Record{}, true},
		{"a failure KeepFor ago", store.Record{Circuit: store.Circuit{Failures: 1, Last: now.Add(-store.KeepFor)}}, true},
		{"a failure just after", store.Record{Circuit: store.Circuit{Failures: 1, Last: now.Add(-store.KeepFor + time.Nanosecond)}}, false},
		{"no failures, a Last just after", store.Record{Circuit: store.Circuit{Last: recent}}, true},
		{"open, IdleAfter past its Open", store.Record{Circuit: store.Circuit{Failures: 5, Last: recent, Open: just}}, true},
		{"open, just after", store.Record{Circuit: store.Circuit{Failures: 5, Open: recent}}, false},
		{"open past it, its probe out", store.Record{Circuit: store.Circuit{Failures: 5, Open: just, Probe: now.Add(time.Nanosecond)}}, false},
		{"open past it, its probe's lease over", store.Record{Circuit: store.Circuit{Failures: 5, Open: just, Probe: now}}, true},
		{"a limit IdleAfter ago", store.Record{Lanes: []store.Lane{{Limited: just}}}, true},
		{"a limit just after", store.Record{Lanes: []store.Lane{{Limited: recent}}}, false},
	} {
		assert.Equal(t, tc.idle, isIdle(&tc.r, now), tc.name)
	}
}

// TestLaneOfMakesLanes: a lane past a Record's last is made, with those
// before it.
func TestLaneOfMakesLanes(t *testing.T) {
	for l := range numLanes {
		var r store.Record
		s := laneOf(&r, l)
		assert.Len(t, r.Lanes, int(l)+1)
		assert.Same(t, &r.Lanes[l], s)
		assert.Same(t, s, laneOf(&r, l), "a lane there is not made again")
	}
}

// TestEstimateTokensUnknownLength: a body whose length is not known
// (ContentLength 0 with a body, as a request built around a reader of its
// own has) is measured from its GetBody copy.
func TestEstimateTokensUnknownLength(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}],"max_tokens":50}`
	req, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", io.NopCloser(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 0
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(body))), nil }
	assert.Equal(t, int64((len(body)+3)/4+50), EstimateTokens(req))
}

// TestMayWatchNeverMissesAWatchedKey: RoundTrip's first look (mayWatch)
// says "maybe" for every request whose key is watched, whatever the key
// function: the default key, a host too long to keep (its key hashed),
// KeyByModel, a key function of the caller's.
func TestMayWatchNeverMissesAWatchedKey(t *testing.T) {
	long := "https://" + strings.Repeat("h", 300) + ".example.com"
	tenant := func(r *http.Request) string { return r.Header.Get("X-Tenant") }
	for _, tc := range []struct {
		name string
		key  func(*http.Request) string
		held string // the key held
		url  string // a request of it
	}{
		{"the default key", nil, "https://api.example.com", "https://api.example.com/v1/chat/completions"},
		{"a host hashed", nil, boundKey(long), long + "/v1/chat/completions"},
		{"KeyByModel", KeyByModel, "https://api.example.com/gpt-4o", "https://api.example.com/v1/chat/completions"},
		{"KeyByModel, Gemini's path", KeyByModel, "https://g.example.com/gemini-2.5-flash", "https://g.example.com/v1beta/models/gemini-2.5-flash:generateContent"},
		{"a key function's", tenant, "tenant-a", "https://x.example.org/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(tc.key)
			defer cd.Close()
			holdFor(cd, tc.held, time.Now(), time.Hour)
			req, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(`{"model":"gpt-4o"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Tenant", "tenant-a")
			watched, _ := cd.watches(req, req.Body)
			if !watched {
				t.Fatalf("%s is not watched for %s", tc.held, tc.url)
			}
			assert.True(t, cd.watched.Load().mayWatch(req.URL), "mayWatch said no to a watched key")
		})
	}
}
