// Command otel shows retryhttp under OpenTelemetry. It makes one call to a
// fake LLM API on 127.0.0.1 that answers 503, 503 (asking for 500 ms with
// retry-after-ms), then 200, through a stack that gives the call a span
// with one event per try and gives each try a span of its own, a child of
// the call's. It prints the answer, the span tree and the metrics.
//
//	go run .
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/retryhttp/retryhttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "otel example:", err)
		os.Exit(1)
	}
}

// backoff is the transport's own wait here: no jitter, so the printed waits
// are the same on every run, and short, so `go run .` is quick.
var backoff = retryhttp.Backoff{Base: 200 * time.Millisecond, Factor: 2, Max: time.Second}

// run starts the fake provider, makes one call that is retried twice, and
// writes the answer, the span tree and the metrics to out. opts go to the
// retryhttp.Transport after the example's own (a test passes the clock of
// retryhttptest, on which the waits take no time).
func run(ctx context.Context, out io.Writer, opts ...retryhttp.Option) (err error) {
	p := newProvider(fail(http.StatusServiceUnavailable), fail(http.StatusServiceUnavailable, "retry-after-ms", "500"), ok())
	defer p.Close()

	// An in-memory exporter with a syncer: spans are kept as they end, and
	// the SDK starts no goroutine. A real program uses a batcher and OTLP.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() {
		ctx := context.WithoutCancel(ctx)
		err = errors.Join(err, tp.Shutdown(ctx), mp.Shutdown(ctx))
	}()

	tel, err := newTelemetry(tp, mp)
	if err != nil {
		return err
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	// otelhttp.Transport has no CloseIdleConnections to pass on: close the
	// base's connections here, before the provider stops (defers run last first).
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: tel.both(base, append([]retryhttp.Option{retryhttp.WithBackoff(backoff)}, opts...)...)}

	// One user turn of the public tier: at most 10 s of waiting in all.
	ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
	text, err := ask(ctx, client, p.URL)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "answer: %s\n\ntrace:\n", text)
	if err := printTree(out, spans.GetSpans()); err != nil {
		return err
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	fmt.Fprint(out, "\nmetrics:\n")
	return printMetrics(out, rm, metricTries, metricWaits, "http.client.request.duration")
}

// ask posts one chat completion to the provider at baseURL and returns its
// answer. The body is a bytes.Reader, so the request has GetBody and every
// retry sends it again (R10).
func ask(ctx context.Context, client *http.Client, baseURL string) (string, error) {
	body := []byte(`{"model":"fake-1","messages":[{"role":"user","content":"Say hello."}]}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close() // ends the call span and the last try span
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	var v struct{ Message string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", err
	}
	return v.Message, nil
}
