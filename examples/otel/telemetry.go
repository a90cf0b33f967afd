package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/retryhttp/retryhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the metrics below.
const scope = "github.com/retryhttp/retryhttp/examples/otel"

// Names of our own. No OpenTelemetry convention covers retries, so they
// live under retryhttp.*; everything a convention names (server.address,
// http.request.resend_count, http.response.status_code) uses its name.
const (
	metricTries = "retryhttp.client.tries"         // counter, {try}
	metricWaits = "retryhttp.client.wait.duration" // histogram, s

	keyOutcome      = attribute.Key("retryhttp.outcome")          // counter; call span: the last try's
	keyStatusClass  = attribute.Key("retryhttp.status_class")     // counter: 2xx, 4xx, 5xx, ..., error
	keyWaitFrom     = attribute.Key("retryhttp.wait.from")        // histogram: backoff, retry-after, cooldown
	keyTries        = attribute.Key("retryhttp.tries")            // call span: tries sent
	keyBudgetWaited = attribute.Key("retryhttp.budget.waited_ms") // call span: the Budget's total so far
	keyBudgetLeft   = attribute.Key("retryhttp.budget.left_ms")   // call span: what the Budget has left
	keyRateLimited  = attribute.Key("retryhttp.rate_limited")     // call span: failed fast (ErrRateLimited)
	keyRetryAfter   = attribute.Key("retryhttp.retry_after_ms")   // call span: the server's last ask, when it failed
	keyFirstToken   = attribute.Key("retryhttp.first_token_ms")   // call span: the stream's time to first token (WithStreamRetry)

	// eventTry is the span event of one try on the call span. Its
	// attributes are named as the fields of retryhttp's retry log line
	// (R14), so a log line and an event read alike.
	eventTry = "retryhttp.try"
)

// waitBuckets are the bounds, in seconds, of the wait histogram: from a
// short backoff to the minutes a provider's Retry-After may ask for.
var waitBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// telemetry builds Transport stacks that report to one TracerProvider and
// one MeterProvider. It is safe for concurrent use by multiple goroutines.
type telemetry struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	tries metric.Int64Counter
	waits metric.Float64Histogram
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (*telemetry, error) {
	meter := mp.Meter(scope)
	tries, err := meter.Int64Counter(metricTries,
		metric.WithUnit("{try}"),
		metric.WithDescription("Tries sent by retryhttp, by what the transport did next and the status class."))
	if err != nil {
		return nil, err
	}
	waits, err := meter.Float64Histogram(metricWaits,
		metric.WithUnit("s"),
		metric.WithDescription("Waits of retryhttp between tries, by which side set them."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	if err != nil {
		return nil, err
	}
	return &telemetry{tp: tp, mp: mp, tries: tries, waits: waits}, nil
}

// perCall is the stack most users want: one span per call, one event on it
// per try, and the metrics.
//
//	otelhttp -> callRecorder -> retryhttp (Observer: events, metrics) -> base
//
// The call span is the only HTTP span, so it is a CLIENT span named by the
// method, as the convention allows when the tries get no spans of their own.
func (t *telemetry) perCall(base http.RoundTripper, opts ...retryhttp.Option) http.RoundTripper {
	retries := retryhttp.New(base, append(opts[:len(opts):len(opts)], retryhttp.WithObserver(t.observeCall))...)
	return otelhttp.NewTransport(callRecorder{retries},
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(t.mp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(spanName))
}

// perTry gives every try a CLIENT span of its own, with
// http.request.resend_count, as the HTTP conventions describe; the metrics
// come from the Observer, which adds no events here.
//
//	retryhttp (Observer: metrics) -> otelhttp -> resendCounter -> base
func (t *telemetry) perTry(base http.RoundTripper, opts ...retryhttp.Option) *retryhttp.Transport {
	return retryhttp.New(t.tryTransport(base), append(opts[:len(opts):len(opts)], retryhttp.WithObserver(t.countTry))...)
}

// both composes the two orders in one stack: a call span with an event per
// try above the retries, a CLIENT span per try below them, each try span a
// child of the call span.
//
//	otelhttp (INTERNAL, no metrics, injects nothing) -> callRecorder
//	  -> retryhttp (Observer: events, metrics) -> otelhttp (CLIENT) -> resendCounter -> base
//
// The conventions say an instrumentation that makes a span per try should
// not also make a logical HTTP client span; so here the call span is
// INTERNAL and named "retryhttp {method}", it records no
// http.client.request.duration (the tries do: one per request sent, as the
// convention means it), and only the try spans go out in traceparent.
func (t *telemetry) both(base http.RoundTripper, opts ...retryhttp.Option) http.RoundTripper {
	retries := retryhttp.New(t.tryTransport(base), append(opts[:len(opts):len(opts)], retryhttp.WithObserver(t.observeCall))...)
	return otelhttp.NewTransport(callRecorder{retries},
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		otelhttp.WithSpanOptions(trace.WithSpanKind(trace.SpanKindInternal)),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "retryhttp " + spanName("", r) }))
}

// tryTransport makes one CLIENT span per request it is given: below the
// retries, one per try.
func (t *telemetry) tryTransport(base http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(resendCounter{base},
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(t.mp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(spanName))
}

// spanName is the HTTP conventions' span name: the method, or "HTTP" for a
// method they do not know (there is no low-cardinality target on a client).
func spanName(_ string, r *http.Request) string {
	switch r.Method {
	case "":
		return http.MethodGet
	case http.MethodConnect, http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPatch, http.MethodPost, http.MethodPut, http.MethodTrace:
		return r.Method
	}
	return "HTTP"
}

// resendCounter puts http.request.resend_count on the try span. It must sit
// below otelhttp: only there is the try's span in the request's context,
// and ResendCount reads the try's context. otelhttp's own options do not
// fit: WithSpanOptions are the same for every span of a Transport, and a
// Labeler's attributes go to metrics, not spans. The convention makes the
// attribute recommended "if and only if request was retried", so the first
// try (count 0) has none.
type resendCounter struct{ next http.RoundTripper } // nil: http.DefaultTransport

func (c resendCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if n := retryhttp.ResendCount(r.Context()); n > 0 {
		trace.SpanFromContext(r.Context()).SetAttributes(semconv.HTTPRequestResendCount(n))
	}
	next := c.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// callRecorder sits just above the retries, under the call span, and
// records how the call ended: what its Budget came to, and whether it failed
// fast. The Observer cannot: it is called before the transport decides to
// fail fast (R8), and not at all when the caller's context ends during a wait.
type callRecorder struct{ next http.RoundTripper }

func (c callRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return resp, err
	}
	var rerr *retryhttp.Error
	if errors.As(err, &rerr) {
		// The Observer set these from the last try; a call canceled
		// during a wait ends with Reason Canceled, which no try reports.
		span.SetAttributes(keyTries.Int(rerr.Tries), keyOutcome.String(rerr.Reason.String()))
	}
	if b := retryhttp.BudgetFrom(r.Context()); b != nil {
		span.SetAttributes(
			keyBudgetWaited.Int64(b.Waited().Milliseconds()),
			keyBudgetLeft.Int64(b.Left().Milliseconds()),
			keyRateLimited.Bool(errors.Is(err, retryhttp.ErrRateLimited)),
		)
		if rerr != nil && rerr.RetryAfter > 0 {
			span.SetAttributes(keyRetryAfter.Int64(rerr.RetryAfter.Milliseconds()))
		}
	}
	return resp, err
}

// observeCall is the Observer of the call span: one event per try on the
// span in ctx (the caller's context, so otelhttp's call span), the call's
// tries and outcome so far as attributes, and the metrics.
func (t *telemetry) observeCall(ctx context.Context, a retryhttp.Attempt) {
	t.countTry(ctx, a)
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 11)
	attrs = append(attrs,
		attribute.Int("try", a.Try),
		attribute.Int("status", a.Status),
		attribute.String("class", a.Class.String()),
		attribute.String("outcome", a.Outcome.String()),
		attribute.Int64("elapsed_ms", a.Elapsed.Milliseconds()),
	)
	if a.Outcome == retryhttp.Retrying {
		// A try that is not retried has no wait: no wait_ms 0 "from backoff".
		attrs = append(attrs,
			attribute.Int64("wait_ms", a.Wait.Milliseconds()),
			attribute.String("wait_from", a.From.String()))
	}
	if a.Held > 0 {
		attrs = append(attrs, attribute.Int64("held_ms", a.Held.Milliseconds()))
	}
	if a.Err != nil {
		attrs = append(attrs, attribute.String("error", a.Err.Error())) // holds no secret (R14)
	}
	if a.StreamError != "" {
		attrs = append(attrs, attribute.String("stream_error", a.StreamError)) // its type, never its message (R26)
	}
	if a.FirstToken > 0 {
		attrs = append(attrs, attribute.Int64("first_token_ms", a.FirstToken.Milliseconds()))
	}
	span.AddEvent(eventTry, trace.WithAttributes(attrs...))
	span.SetAttributes(keyTries.Int(a.Try), keyOutcome.String(a.Outcome.String()))
	if a.FirstToken > 0 {
		// The stream handed over: its time to first token, from its own
		// try's send (R26), what a streaming UI's user waited for before
		// the first word, less the tries before it.
		span.SetAttributes(keyFirstToken.Int64(a.FirstToken.Milliseconds()))
	}
}

// countTry is the Observer of the metrics: every try counts once; every
// wait (a retry's, and a Cooldown's hold before a try) is one sample. ctx
// carries the caller's span, so an SDK that keeps exemplars links a long
// wait to its trace.
func (t *telemetry) countTry(ctx context.Context, a retryhttp.Attempt) {
	server := serverAddress(a.URL)
	t.tries.Add(ctx, 1, metric.WithAttributes(
		keyOutcome.String(a.Outcome.String()),
		keyStatusClass.String(statusClass(a.Status)),
		server))
	if a.Outcome == retryhttp.Retrying {
		t.waits.Record(ctx, a.Wait.Seconds(), metric.WithAttributes(keyWaitFrom.String(a.From.String()), server))
	}
	if a.Held > 0 {
		t.waits.Record(ctx, a.Held.Seconds(), metric.WithAttributes(keyWaitFrom.String(retryhttp.FromCooldown.String()), server))
	}
}

// statusClass is "2xx" for 200 to 299 and so on; "error" for a try that
// got no response.
func statusClass(status int) string {
	if status <= 0 {
		return "error"
	}
	return strconv.Itoa(status/100) + "xx"
}

// serverAddress is the convention's server.address of an Attempt's URL
// (scheme://host/path): the host, without the port.
func serverAddress(rawURL string) attribute.KeyValue {
	u, err := url.Parse(rawURL)
	if err != nil {
		return semconv.ServerAddress("")
	}
	return semconv.ServerAddress(u.Hostname())
}
