package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain fails the package if a test leaves a goroutine behind: a fake
// provider, an idle connection of the SDK's client, or a timer of the
// transport.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs what `go run .` runs, on the test kit's Clock: the answer is
// printed after one retry, which waited the 600 ms the provider asked for (at
// once), and the retry is in the log.
func TestRun(t *testing.T) {
	clk := retryhttptest.NewClock()
	core, logs := observer.New(zap.WarnLevel)
	var out bytes.Buffer
	if err := run(context.Background(), &out, retryhttp.WithClock(clk), retryhttp.WithLogger(zap.New(core))); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got, want := out.String(), strings.Join(answer, "")+"\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	if got, want := clk.Waits(), []time.Duration{600 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	retries := logs.FilterMessage("llm transient failure — retrying").All()
	if len(retries) != 1 {
		t.Fatalf("got %d retry log lines, want 1 (all: %v)", len(retries), logs.All())
	}
	fields := retries[0].ContextMap()
	for key, want := range map[string]any{"status": int64(429), "wait_ms": int64(600), "wait_from": "retry-after", "method": "POST"} {
		if got := fields[key]; got != want {
			t.Errorf("retry log field %s = %v, want %v", key, got, want)
		}
	}
}
