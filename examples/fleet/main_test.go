package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/retryredis"
	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs what `go run .` runs, small: a table row per fleet.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	o := options{replicas: 2, workers: 2, span: 300 * time.Millisecond, dialects: []retryhttptest.Dialect{retryhttptest.OpenAIDialect}}
	if err := run(context.Background(), &out, o, ""); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{"an embedded Redis (miniredis)", "1 replica, all workers", "2, each on its own", "2, sharing retryredis"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed no %q:\n%s", want, out.String())
		}
	}
}

// TestMiniredisRunsTheScripts: the embedded Redis runs retryredis's
// scripts (EVALSHA, TIME in a script, PUBLISH from one) and its pub/sub,
// so the example shares for real and does not fall back to each replica's
// own state.
func TestMiniredisRunsTheScripts(t *testing.T) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	client := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := retryredis.NewStore(client()), retryredis.NewStore(client())
	defer a.Close()
	defer b.Close()
	heard := make(chan string, 4)
	b.Listen(func(key string, _ store.State) { heard <- key })
	time.Sleep(50 * time.Millisecond) // subscribed
	ctx := context.Background()
	st, err := a.Apply(ctx, "k", []store.Op{{Kind: store.OpRates, Per: 1e6, Burst: 1e12, Rates: "r"},
		{Kind: store.OpRates, Lane: 1, Per: 5e-7, Burst: 3e-300, Rates: "s"},
		{Kind: store.OpTake, Costs: []float64{1}}, {Kind: store.OpHold, For: time.Second}})
	if err != nil {
		t.Fatalf("Apply on miniredis: %v", err)
	}
	if !st.Took || st.Lane(0).Per != 1e6 || st.Lane(0).Until.Sub(st.Now) != time.Second {
		t.Errorf("state %+v", st)
	}
	// Read back from what miniredis keeps: the exponents are read there too.
	if st, err = a.Apply(ctx, "k", nil); err != nil || st.Lane(0).Burst != 1e12 || st.Lane(1).Per != 5e-7 || st.Lane(1).Burst != 3e-300 {
		t.Errorf("read back %+v, %v", st.Lanes, err)
	}
	select {
	case k := <-heard:
		if k != "k" {
			t.Errorf("heard %q", k)
		}
	case <-time.After(2 * time.Second):
		t.Error("the hold was not heard")
	}
}
