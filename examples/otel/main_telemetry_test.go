package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

// TestObserveCall: the Observer's event for tries no end-to-end test can
// make yet (a Cooldown hold, a transport error), and the hold as a wait
// from the cooldown in the histogram.
func TestObserveCall(t *testing.T) {
	r := newRig(t)
	ctx, span := r.tp.Tracer("test").Start(context.Background(), "call")
	r.tel.observeCall(ctx, retryhttp.Attempt{
		Call: 1, Try: 2, MaxTries: 3, Method: "POST", URL: "https://api.example.com/v1/chat/completions",
		Err: io.ErrUnexpectedEOF, Class: retryhttp.Transient, Elapsed: 40 * time.Millisecond,
		Wait: 1500 * time.Millisecond, From: retryhttp.FromRetryAfter, Outcome: retryhttp.Retrying,
		Held: 250 * time.Millisecond,
	})
	r.tel.observeCall(ctx, retryhttp.Attempt{
		Call: 1, Try: 3, MaxTries: 3, Method: "POST", URL: "https://api.example.com/v1/chat/completions",
		Status: 502, Class: retryhttp.Transient, Outcome: retryhttp.Exhausted,
	})
	span.End()

	spans := r.spans.GetSpans()
	require.Len(t, spans, 1)
	events := spans[0].Events
	require.Len(t, events, 2)
	first, last := events[0].Attributes, events[1].Attributes
	assertAttr(t, first, "status", attribute.IntValue(0))
	assertAttr(t, first, "elapsed_ms", attribute.Int64Value(40))
	assertAttr(t, first, "wait_ms", attribute.Int64Value(1500))
	assertAttr(t, first, "wait_from", attribute.StringValue("retry-after"))
	assertAttr(t, first, "held_ms", attribute.Int64Value(250))
	assertAttr(t, first, "error", attribute.StringValue(io.ErrUnexpectedEOF.Error()))
	assertAttr(t, last, "outcome", attribute.StringValue("exhausted"))
	for _, k := range []attribute.Key{"wait_ms", "wait_from", "held_ms", "error"} {
		assertNoAttr(t, last, k)
	}
	assertAttr(t, spans[0].Attributes, keyOutcome, attribute.StringValue("exhausted"))

	rm := r.metrics(t)
	assert.Equal(t, map[string]int64{"retrying/error/api.example.com": 1, "exhausted/5xx/api.example.com": 1},
		counterByAttrs(t, rm, metricTries, keyOutcome, keyStatusClass, "server.address"))
	waits := histogramByAttrs(t, rm, metricWaits, keyWaitFrom)
	assert.Equal(t, map[string]float64{"retry-after": 1.5, "cooldown": 0.25}, waits)
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]string{0: "error", 200: "2xx", 299: "2xx", 404: "4xx", 429: "4xx", 503: "5xx"} {
		assert.Equal(t, want, statusClass(status), "status %d", status)
	}
}

// TestObserveCallStream: with WithStreamRetry, a try whose stream began
// with an error event has its type on its event, and the stream handed
// over its time to first token, on its event and as the call span's
// retryhttp.first_token_ms (R26).
func TestObserveCallStream(t *testing.T) {
	r := newRig(t)
	ctx, span := r.tp.Tracer("test").Start(context.Background(), "call")
	r.tel.observeCall(ctx, retryhttp.Attempt{
		Call: 1, Try: 1, MaxTries: 3, Method: "POST", URL: "https://api.anthropic.com/v1/messages",
		Status: 200, Class: retryhttp.Transient, StreamError: "overloaded_error",
		Wait: 400 * time.Millisecond, Outcome: retryhttp.Retrying,
	})
	r.tel.observeCall(ctx, retryhttp.Attempt{
		Call: 1, Try: 2, MaxTries: 3, Method: "POST", URL: "https://api.anthropic.com/v1/messages",
		Status: 200, Class: retryhttp.Permanent, Outcome: retryhttp.Done, FirstToken: 230 * time.Millisecond,
	})
	span.End()

	spans := r.spans.GetSpans()
	require.Len(t, spans, 1)
	events := spans[0].Events
	require.Len(t, events, 2)
	first, last := events[0].Attributes, events[1].Attributes
	assertAttr(t, first, "stream_error", attribute.StringValue("overloaded_error"))
	assertNoAttr(t, first, "first_token_ms")
	assertAttr(t, last, "first_token_ms", attribute.Int64Value(230))
	assertNoAttr(t, last, "stream_error")
	assertAttr(t, spans[0].Attributes, keyFirstToken, attribute.Int64Value(230))
}
