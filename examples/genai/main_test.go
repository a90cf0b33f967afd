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
// Gemini API, an idle connection of the SDK's client, a stream the SDK did
// not close, or a timer of the transport. The one goroutine it lets go is
// OpenCensus's stats worker, which the SDK's dependencies
// (cloud.google.com/go/auth) start in an init function, once per process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestRun runs what `go run .` runs, on the test kit's Clock: the answer is
// printed after one retry, and the retry is in the log.
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
	retries := logs.FilterMessage(msgRetrying).All()
	if len(retries) != 1 {
		t.Fatalf("got %d retry log lines, want 1 (all: %v)", len(retries), logs.All())
	}
	fields := retries[0].ContextMap()
	for key, want := range map[string]any{"attempt": int64(1), "status": int64(429), "method": "POST"} {
		if got := fields[key]; got != want {
			t.Errorf("retry log field %s = %v, want %v", key, got, want)
		}
	}

	// R19: Gemini's 429 asks for its wait in the body only.
	t.Run("waits the body's retryDelay", func(t *testing.T) {
		wait, err := time.ParseDuration(runRetryDelay)
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]any{"wait_ms": wait.Milliseconds(), "wait_from": "retry-after"} {
			if got := fields[key]; got != want {
				t.Errorf("retry log field %s = %v, want %v", key, got, want)
			}
		}
		if got, want := clk.Waits(), []time.Duration{wait}; !slices.Equal(got, want) {
			t.Errorf("waits %v, want %v", got, want)
		}
	})
}
