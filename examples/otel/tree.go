package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanKeys are the span attributes worth reading in a tree, in the order
// printed; the rest (url.full, server.port, ...) are left out.
var spanKeys = []attribute.Key{
	"http.response.status_code",
	"http.request.resend_count",
	"error.type",
	keyTries,
	keyOutcome,
	keyBudgetWaited,
	keyBudgetLeft,
	keyRateLimited,
	keyRetryAfter,
}

// printTree writes spans as an indented tree: each span with its kind, its
// status when set, and the attributes of spanKeys it has; under it, its
// events and its children, in the order they happened.
func printTree(w io.Writer, spans tracetest.SpanStubs) error {
	known := make(map[trace.SpanID]bool, len(spans))
	for _, s := range spans {
		known[s.SpanContext.SpanID()] = true
	}
	children := make(map[trace.SpanID][]tracetest.SpanStub)
	var roots []tracetest.SpanStub
	for _, s := range spans {
		if p := s.Parent.SpanID(); s.Parent.IsValid() && known[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) }
	slices.SortStableFunc(roots, byStart)

	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		indent := strings.Repeat("  ", depth)
		fmt.Fprintf(&b, "%s%s [%s", indent, s.Name, s.SpanKind)
		if s.Status.Code != codes.Unset {
			fmt.Fprintf(&b, ", %s", s.Status.Code)
			if s.Status.Description != "" {
				fmt.Fprintf(&b, ": %s", s.Status.Description)
			}
		}
		b.WriteString("]")
		set := attribute.NewSet(s.Attributes...)
		for _, k := range spanKeys {
			if v, ok := set.Value(k); ok {
				fmt.Fprintf(&b, " %s=%s", k, v.Emit())
			}
		}
		b.WriteString("\n")

		// Events and child spans, merged in time order: each try span,
		// then the event the Observer added for it.
		type item struct {
			at    time.Time
			event string
			span  *tracetest.SpanStub
		}
		var items []item
		for _, e := range s.Events {
			var line strings.Builder
			fmt.Fprintf(&line, "%s  event %s:", indent, e.Name)
			for _, kv := range e.Attributes {
				fmt.Fprintf(&line, " %s=%s", kv.Key, kv.Value.Emit())
			}
			items = append(items, item{at: e.Time, event: line.String()})
		}
		kids := children[s.SpanContext.SpanID()]
		slices.SortStableFunc(kids, byStart)
		for i := range kids {
			items = append(items, item{at: kids[i].StartTime, span: &kids[i]})
		}
		slices.SortStableFunc(items, func(a, b item) int { return a.at.Compare(b.at) })
		for _, it := range items {
			if it.span != nil {
				walk(*it.span, depth+1)
				continue
			}
			b.WriteString(it.event)
			b.WriteString("\n")
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// metricKeys are the metric attributes worth reading; the rest (the port,
// the protocol version) are left out.
var metricKeys = []attribute.Key{
	keyOutcome, keyStatusClass, keyWaitFrom,
	"http.request.method", "http.response.status_code", "error.type", "server.address",
}

// printMetrics writes one line per data point of the named metrics in rm,
// in the order named: a counter's value, a histogram's count (and sum, for
// ours).
func printMetrics(w io.Writer, rm metricdata.ResourceMetrics, names ...string) error {
	var b strings.Builder
	for _, name := range names {
		m, ok := findMetric(rm, name)
		if !ok {
			fmt.Fprintf(&b, "%s: none\n", name)
			continue
		}
		var lines []string
		switch data := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range data.DataPoints {
				lines = append(lines, fmt.Sprintf("%s{%s} %d", name, attrs(dp.Attributes), dp.Value))
			}
		case metricdata.Histogram[float64]:
			for _, dp := range data.DataPoints {
				line := fmt.Sprintf("%s{%s} count=%d", name, attrs(dp.Attributes), dp.Count)
				if strings.HasPrefix(name, "retryhttp.") {
					// Waits are on the transport's clock; otelhttp's
					// durations are real time, different on every run.
					line += fmt.Sprintf(" sum=%g%s", dp.Sum, m.Unit)
				}
				lines = append(lines, line)
			}
		default:
			lines = append(lines, fmt.Sprintf("%s: %T", name, data))
		}
		slices.Sort(lines)
		for _, l := range lines {
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// findMetric returns the metric called name in rm.
func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// attrs writes the metricKeys of set as k=v,k=v.
func attrs(set attribute.Set) string {
	var parts []string
	for _, k := range metricKeys {
		if v, ok := set.Value(k); ok {
			parts = append(parts, string(k)+"="+v.Emit())
		}
	}
	return strings.Join(parts, ",")
}
