package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTryTimeoutAndCallerEndTogether: the per-try timeout fires and the
// caller's context ends while a try waits for its headers, which then come.
// The try's error is the caller's, not a try timeout (R13), returned as it is
// on a first try (R9); the late response is closed, not handed back with it
// (R1: a response or an error, never both, nor neither).
func TestTryTimeoutAndCallerEndTogether(t *testing.T) {
	const d = 5 * time.Second
	clk := newClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	late := &trackedBody{r: strings.NewReader("late")}
	var tries int
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		tries++
		clk.Add(d) // the try timeout fires
		cancel()   // and the caller gives up, before the headers come
		resp := respond(http.StatusOK, "")
		resp.Body = late
		return resp, nil
	})
	tr := New(base, WithClock(clk), WithBackoff(noJitter), WithTryTimeout(d))
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1", nil))
	require.Nil(t, resp)
	assert.ErrorIs(t, err, context.Canceled)
	var timedOut *tryTimeoutError
	assert.False(t, errors.As(err, &timedOut), "%v is a try timeout; the caller gave up", err)
	assert.Equal(t, 1, tries)
	assert.EqualValues(t, 1, late.closed.Load(), "the late response's body, closed")
}
