package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a fake
// provider, an idle connection, a timer of the transport, or an SDK worker.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rig is a fake provider, an OpenTelemetry SDK that keeps every span (an
// in-memory exporter) and every metric (a manual reader), and the test kit's
// Clock, on which every wait of the transport takes no time and is recorded.
type rig struct {
	p      *provider
	clock  *retryhttptest.Clock
	tp     *sdktrace.TracerProvider
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tel    *telemetry
	base   *http.Transport
}

func newRig(t *testing.T, plan ...reply) *rig {
	t.Helper()
	p := newProvider(plan...)
	t.Cleanup(p.Close)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		assert.NoError(t, tp.Shutdown(context.Background()))
		assert.NoError(t, mp.Shutdown(context.Background()))
	})
	tel, err := newTelemetry(tp, mp)
	require.NoError(t, err)
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections) // before p.Close: cleanups run last first
	return &rig{p: p, clock: retryhttptest.NewClock(), tp: tp, spans: spans, reader: reader, tel: tel, base: base}
}

// opts are the rig's Clock and a backoff without jitter: the waits are 1 s,
// then 2 s, unless the server asks for more.
func (r *rig) opts() []retryhttp.Option {
	return []retryhttp.Option{
		retryhttp.WithClock(r.clock),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: time.Second, Factor: 2}),
	}
}

// post sends one POST with a body through rt and reads the answer to the
// end, which ends the spans.
func (r *rig) post(t *testing.T, ctx context.Context, rt http.RoundTripper) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.p.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"fake-1"}`))
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, nil
}

func (r *rig) metrics(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	return rm
}

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

// TestPerCall: the call span alone, a CLIENT span named by the method, with
// an event per try and, when the request carries a Budget, what it came to
// and whether the call failed fast.
func TestPerCall(t *testing.T) {
	tests := []struct {
		name        string
		plan        []reply
		budget      bool
		wantStatus  int // 0: an error that errors.Is ErrRateLimited
		wantOutcome []string
		wantWaits   []time.Duration // on the Clock
		wantAttrs   map[attribute.Key]attribute.Value
		wantNo      []attribute.Key
		wantSpan    codes.Code
	}{
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
	for _, tt := range tests {
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

// TestRun runs what `go run .` runs, on the test kit's Clock, and checks what
// it prints.
func TestRun(t *testing.T) {
	clk := retryhttptest.NewClock()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, retryhttp.WithClock(clk)))
	assert.Equal(t, []time.Duration{200 * time.Millisecond, 500 * time.Millisecond}, clk.Waits())
	want := `answer: Hello from the fake provider.

trace:
retryhttp POST [internal] http.response.status_code=200 retryhttp.tries=3 retryhttp.outcome=done retryhttp.budget.waited_ms=700 retryhttp.budget.left_ms=9300 retryhttp.rate_limited=false
  POST [client, Error] http.response.status_code=503 error.type=503
  event retryhttp.try: try=1 status=503 class=transient outcome=retrying elapsed_ms=0 wait_ms=200 wait_from=backoff
  POST [client, Error] http.response.status_code=503 http.request.resend_count=1 error.type=503
  event retryhttp.try: try=2 status=503 class=transient outcome=retrying elapsed_ms=0 wait_ms=500 wait_from=retry-after
  POST [client] http.response.status_code=200 http.request.resend_count=2
  event retryhttp.try: try=3 status=200 class=permanent outcome=done elapsed_ms=0

metrics:
retryhttp.client.tries{retryhttp.outcome=done,retryhttp.status_class=2xx,server.address=127.0.0.1} 1
retryhttp.client.tries{retryhttp.outcome=retrying,retryhttp.status_class=5xx,server.address=127.0.0.1} 2
retryhttp.client.wait.duration{retryhttp.wait.from=backoff,server.address=127.0.0.1} count=1 sum=0.2s
retryhttp.client.wait.duration{retryhttp.wait.from=retry-after,server.address=127.0.0.1} count=1 sum=0.5s
http.client.request.duration{http.request.method=POST,http.response.status_code=200,server.address=127.0.0.1} count=1
http.client.request.duration{http.request.method=POST,http.response.status_code=503,server.address=127.0.0.1} count=2
`
	assert.Equal(t, want, out.String())
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]string{0: "error", 200: "2xx", 299: "2xx", 404: "4xx", 429: "4xx", 503: "5xx"} {
		assert.Equal(t, want, statusClass(status), "status %d", status)
	}
}

// splitCall returns the one span that is no child of another in spans, and
// the others, the tries, in the order they started.
func splitCall(t *testing.T, spans tracetest.SpanStubs) (call tracetest.SpanStub, tries []tracetest.SpanStub) {
	t.Helper()
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		if ids[s.Parent.SpanID()] {
			tries = append(tries, s)
		} else {
			roots = append(roots, s)
		}
	}
	require.Len(t, roots, 1, "want one span above the tries")
	slices.SortFunc(tries, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	return roots[0], tries
}

// assertResendCounts checks http.request.resend_count on the try spans:
// none on the first (the convention sets it only on a resend), then 1, 2, ...
func assertResendCounts(t *testing.T, tries []tracetest.SpanStub) {
	t.Helper()
	require.NotEmpty(t, tries)
	assertNoAttr(t, tries[0].Attributes, "http.request.resend_count")
	for i, s := range tries[1:] {
		assertAttr(t, s.Attributes, "http.request.resend_count", attribute.Int64Value(int64(i+1)))
	}
}

// assertSentUnder checks that try i went out with the traceparent of try
// span i, so the provider's server span would be its child.
func assertSentUnder(t *testing.T, traceparents []string, tries []tracetest.SpanStub) {
	t.Helper()
	require.Len(t, traceparents, len(tries))
	for i, s := range tries {
		want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
		assert.Equal(t, want, traceparents[i], "traceparent of try %d", i+1)
	}
}

func assertAttr(t *testing.T, kvs []attribute.KeyValue, key attribute.Key, want attribute.Value) {
	t.Helper()
	set := attribute.NewSet(kvs...)
	got, ok := set.Value(key)
	if assert.True(t, ok, "no attribute %s in %v", key, kvs) {
		assert.Equal(t, want.Emit()+" "+want.Type().String(), got.Emit()+" "+got.Type().String(), "attribute %s", key)
	}
}

func assertNoAttr(t *testing.T, kvs []attribute.KeyValue, key attribute.Key) {
	t.Helper()
	set := attribute.NewSet(kvs...)
	got, ok := set.Value(key)
	assert.False(t, ok, "attribute %s = %s, want none", key, got.Emit())
}

// counterByAttrs sums the named int64 counter by the values of keys, joined
// with "/".
func counterByAttrs(t *testing.T, rm metricdata.ResourceMetrics, name string, keys ...attribute.Key) map[string]int64 {
	t.Helper()
	m, ok := findMetric(rm, name)
	require.True(t, ok, "no metric %s", name)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, want a Sum[int64]", name, m.Data)
	assert.True(t, sum.IsMonotonic, "%s is not a counter", name)
	got := map[string]int64{}
	for _, dp := range sum.DataPoints {
		got[join(dp.Attributes, keys)] += dp.Value
	}
	return got
}

// histogramTotal returns the named float64 histogram's count and sum over
// all its data points.
func histogramTotal(t *testing.T, rm metricdata.ResourceMetrics, name string) (count uint64, sum float64) {
	t.Helper()
	m, ok := findMetric(rm, name)
	require.True(t, ok, "no metric %s", name)
	assert.Equal(t, "s", m.Unit, "unit of %s", name)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T, want a Histogram[float64]", name, m.Data)
	for _, dp := range h.DataPoints {
		count += dp.Count
		sum += dp.Sum
	}
	return count, sum
}

// histogramByAttrs sums the named float64 histogram by the values of keys.
func histogramByAttrs(t *testing.T, rm metricdata.ResourceMetrics, name string, keys ...attribute.Key) map[string]float64 {
	t.Helper()
	m, ok := findMetric(rm, name)
	require.True(t, ok, "no metric %s", name)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T, want a Histogram[float64]", name, m.Data)
	got := map[string]float64{}
	for _, dp := range h.DataPoints {
		got[join(dp.Attributes, keys)] += dp.Sum
	}
	return got
}

func join(set attribute.Set, keys []attribute.Key) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		v, _ := set.Value(k)
		parts[i] = v.Emit()
	}
	return strings.Join(parts, "/")
}
