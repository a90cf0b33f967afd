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
