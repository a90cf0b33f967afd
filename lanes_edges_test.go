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
		{"a failure IdleAfter ago", store.Record{Circuit: store.Circuit{Failures: 1, Last: just}}, true},
		{"a failure just after", store.Record{Circuit: store.Circuit{Failures: 1, Last: recent}}, false},
		{"no failures, a Last just after", store.Record{Circuit: store.Circuit{Last: recent}}, true},
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
