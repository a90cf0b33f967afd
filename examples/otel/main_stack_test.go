package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TestBothOrders: the call span above the retries and the try spans below
// them, in one stack, against a provider answering 503, 503, 200. One call
// span; three try spans, each its child, with resend counts 0 (none), 1, 2;
// one event per try on the call span; each try sent under its own span; the
// counter, the wait histogram and otelhttp's request duration (per try,
// not per call).
func TestBothOrders(t *testing.T) {
	r := newRig(t, fail(503), fail(503), ok())
	start := time.Now()
	status, err := r.post(t, context.Background(), r.tel.both(r.base, r.opts()...))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Less(t, time.Since(start), 2*time.Second, "the test waited for real")
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, r.clock.Waits())

	spans := r.spans.GetSpans()
	require.Len(t, spans, 4)
	call, tries := splitCall(t, spans)
	assert.Equal(t, "retryhttp POST", call.Name)
	assert.Equal(t, trace.SpanKindInternal, call.SpanKind)
	assert.False(t, call.Parent.IsValid(), "the call span is a root here")
	assert.Equal(t, codes.Unset, call.Status.Code)
	assertAttr(t, call.Attributes, keyTries, attribute.IntValue(3))
	assertAttr(t, call.Attributes, keyOutcome, attribute.StringValue("done"))
	assertNoAttr(t, call.Attributes, keyBudgetWaited) // no Budget in the context

	wantStatus := []int64{503, 503, 200}
	for i, s := range tries {
		assert.Equal(t, "POST", s.Name, "try %d", i+1)
		assert.Equal(t, trace.SpanKindClient, s.SpanKind, "try %d", i+1)
		assert.Equal(t, call.SpanContext.TraceID(), s.SpanContext.TraceID(), "try %d", i+1)
		assert.Equal(t, call.SpanContext.SpanID(), s.Parent.SpanID(), "try %d is not a child of the call span", i+1)
		assertAttr(t, s.Attributes, "http.response.status_code", attribute.Int64Value(wantStatus[i]))
	}
	assertResendCounts(t, tries)
	assertSentUnder(t, r.p.Traceparents(), tries)

	require.Len(t, call.Events, 3)
	wantEvents := []map[attribute.Key]attribute.Value{
		{"try": attribute.IntValue(1), "status": attribute.IntValue(503), "class": attribute.StringValue("transient"),
			"outcome": attribute.StringValue("retrying"), "wait_ms": attribute.Int64Value(1000), "wait_from": attribute.StringValue("backoff")},
		{"try": attribute.IntValue(2), "status": attribute.IntValue(503), "class": attribute.StringValue("transient"),
			"outcome": attribute.StringValue("retrying"), "wait_ms": attribute.Int64Value(2000), "wait_from": attribute.StringValue("backoff")},
		{"try": attribute.IntValue(3), "status": attribute.IntValue(200), "class": attribute.StringValue("permanent"),
			"outcome": attribute.StringValue("done")},
	}
	for i, e := range call.Events {
		assert.Equal(t, eventTry, e.Name)
		for k, want := range wantEvents[i] {
			assertAttr(t, e.Attributes, k, want)
		}
		if i == 2 {
			assertNoAttr(t, e.Attributes, "wait_ms")
		}
	}

	rm := r.metrics(t)
	assert.Equal(t, map[string]int64{"retrying/5xx": 2, "done/2xx": 1},
		counterByAttrs(t, rm, metricTries, keyOutcome, keyStatusClass))
	count, sum := histogramTotal(t, rm, metricWaits)
	assert.Equal(t, uint64(2), count, "one wait per retry")
	assert.InDelta(t, 3.0, sum, 1e-9, "waits in seconds")
	count, _ = histogramTotal(t, rm, "http.client.request.duration")
	assert.Equal(t, uint64(3), count, "http.client.request.duration counts requests sent, not calls")
}

// TestPerTry: with the retries above otelhttp alone, every try is a CLIENT
// span, and the tries of one call are siblings under the caller's span, as
// in the HTTP conventions' retry example; the caller's span gets no events.
func TestPerTry(t *testing.T) {
	r := newRig(t, fail(503), fail(429), ok())
	ctx, caller := r.tp.Tracer("test").Start(context.Background(), "caller")
	status, err := r.post(t, ctx, r.tel.perTry(r.base, r.opts()...))
	caller.End()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)

	spans := r.spans.GetSpans()
	require.Len(t, spans, 4)
	root, tries := splitCall(t, spans)
	assert.Equal(t, "caller", root.Name)
	assert.Empty(t, root.Events, "perTry adds no events")
	for i, s := range tries {
		assert.Equal(t, trace.SpanKindClient, s.SpanKind, "try %d", i+1)
		assert.Equal(t, root.SpanContext.SpanID(), s.Parent.SpanID(), "try %d is not a child of the caller's span", i+1)
	}
	assertResendCounts(t, tries)
	assertSentUnder(t, r.p.Traceparents(), tries)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, r.clock.Waits())
	assert.Equal(t, map[string]int64{"retrying/5xx": 1, "retrying/4xx": 1, "done/2xx": 1},
		counterByAttrs(t, r.metrics(t), metricTries, keyOutcome, keyStatusClass))
}

// perCallCase is a row of TestPerCall: the provider plays plan to one call,
// with a Budget in its context if budget.
type perCallCase struct {
	name        string
	plan        []reply
	budget      bool
	wantStatus  int // 0: an error that errors.Is ErrRateLimited
	wantOutcome []string
	wantWaits   []time.Duration // on the Clock
	wantAttrs   map[attribute.Key]attribute.Value
	wantNo      []attribute.Key
	wantSpan    codes.Code
}

// perCallCases are the rows of TestPerCall.
var perCallCases = []perCallCase{
	{
		name: "retried, no Budget", plan: []reply{fail(503), ok()},
		wantStatus: 200, wantOutcome: []string{"retrying", "done"}, wantWaits: []time.Duration{time.Second},
		wantAttrs: map[attribute.Key]attribute.Value{keyTries: attribute.IntValue(2), keyOutcome: attribute.StringValue("done")},
		wantNo:    []attribute.Key{keyBudgetWaited, keyRateLimited},
	},
	{
		name: "retried within the Budget", plan: []reply{fail(503), ok()}, budget: true,
		wantStatus: 200, wantOutcome: []string{"retrying", "done"}, wantWaits: []time.Duration{time.Second},
		wantAttrs: map[attribute.Key]attribute.Value{
			keyBudgetWaited: attribute.Int64Value(1000), keyBudgetLeft: attribute.Int64Value(9000),
			keyRateLimited: attribute.BoolValue(false),
		},
		wantNo: []attribute.Key{keyRetryAfter},
	},
	{
		name: "rate limited past the Budget fails fast", plan: []reply{fail(429, "Retry-After", "30")}, budget: true,
		wantOutcome: []string{"out_of_time"},
		wantAttrs: map[attribute.Key]attribute.Value{
			keyTries: attribute.IntValue(1), keyOutcome: attribute.StringValue("out_of_time"),
			keyBudgetWaited: attribute.Int64Value(0), keyRateLimited: attribute.BoolValue(true),
			keyRetryAfter: attribute.Int64Value(30000),
		},
		wantSpan: codes.Error,
	},
	{
		name: "rate limited without a Budget is handed back", plan: []reply{fail(429, "Retry-After", "30")},
		wantStatus: 429, wantOutcome: []string{"retrying", "retrying", "exhausted"},
		wantWaits: []time.Duration{30 * time.Second, 30 * time.Second},
		wantAttrs: map[attribute.Key]attribute.Value{keyTries: attribute.IntValue(3), keyOutcome: attribute.StringValue("exhausted")},
		wantNo:    []attribute.Key{keyRateLimited},
		wantSpan:  codes.Error,
	},
}

// TestPerCall: the call span alone, a CLIENT span named by the method, with
// an event per try and, when the request carries a Budget, what it came to
// and whether the call failed fast.
func TestPerCall(t *testing.T) {
	for _, tt := range perCallCases {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.plan...)
			ctx := context.Background()
			if tt.budget {
				ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
			}
			status, err := r.post(t, ctx, r.tel.perCall(r.base, r.opts()...))
			if tt.wantStatus == 0 {
				require.ErrorIs(t, err, retryhttp.ErrRateLimited)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.wantStatus, status)
			}
			assert.Equal(t, tt.wantWaits, r.clock.Waits())

			spans := r.spans.GetSpans()
			require.Len(t, spans, 1, "perCall makes one span per call")
			call := spans[0]
			assert.Equal(t, "POST", call.Name)
			assert.Equal(t, trace.SpanKindClient, call.SpanKind)
			assert.Equal(t, tt.wantSpan, call.Status.Code)
			var outcomes []string
			for _, e := range call.Events {
				set := attribute.NewSet(e.Attributes...)
				v, _ := set.Value("outcome")
				outcomes = append(outcomes, v.AsString())
			}
			assert.Equal(t, tt.wantOutcome, outcomes)
			for k, want := range tt.wantAttrs {
				assertAttr(t, call.Attributes, k, want)
			}
			for _, k := range tt.wantNo {
				assertNoAttr(t, call.Attributes, k)
			}
		})
	}
}

// TestCanceledDuringWait: a call whose context ends during a wait ends
// "canceled" on the call span, though its last try's event, sent before the
// wait, says "retrying" (R15: no Attempt is Canceled). The user gives up
// half a second into the first 1 s wait: a function on the Clock, which runs
// when the wait reaches its instant; the call ends there.
func TestCanceledDuringWait(t *testing.T) {
	r := newRig(t, fail(503))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := r.clock.Now()
	r.clock.AfterFunc(500*time.Millisecond, cancel)
	_, err := r.post(t, ctx, r.tel.both(r.base, r.opts()...))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []time.Duration{time.Second}, r.clock.Waits(), "one wait begun")
	assert.Equal(t, 500*time.Millisecond, r.clock.Since(start), "the call ended when it was canceled, mid-wait")

	call, tries := splitCall(t, r.spans.GetSpans())
	assert.Len(t, tries, 1)
	assert.Equal(t, codes.Error, call.Status.Code)
	assertAttr(t, call.Attributes, keyTries, attribute.IntValue(1))
	assertAttr(t, call.Attributes, keyOutcome, attribute.StringValue("canceled"))
	require.Len(t, call.Events, 1)
	assertAttr(t, call.Events[0].Attributes, "outcome", attribute.StringValue("retrying"))
}
