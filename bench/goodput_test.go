package bench

// Tests of the goodput harness: the token bucket and the headers the fake
// provider sends, and a CI-sized run of every row that checks only what must
// hold whatever the clients' tuning. Goodput itself is measured by
// cmd/goodput, never asserted here.

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at   time.Duration
		want Decision
	}
	for _, tc := range []struct {
		name        string
		rate, burst int
		steps       []step
	}{
		{"starts full, refuses the one after the burst", 10, 3, []step{
			{0, Decision{OK: true, Remaining: 2, Reset: 100 * time.Millisecond}},
			{0, Decision{OK: true, Remaining: 1, Reset: 200 * time.Millisecond}},
			{0, Decision{OK: true, Remaining: 0, Reset: 300 * time.Millisecond}},
			{0, Decision{Remaining: 0, Next: 100 * time.Millisecond, Reset: 300 * time.Millisecond}},
		}},
		{"refills continuously, a token at a time", 10, 1, []step{
			{0, Decision{OK: true, Remaining: 0, Reset: 100 * time.Millisecond}},
			{40 * time.Millisecond, Decision{Next: 60 * time.Millisecond, Reset: 60 * time.Millisecond}},
			{101 * time.Millisecond, Decision{OK: true, Remaining: 0, Reset: 100 * time.Millisecond}}, // full, capped at 1
		}},
		{"a refusal takes nothing", 4, 1, []step{
			{0, Decision{OK: true, Reset: 250 * time.Millisecond}},
			{0, Decision{Next: 250 * time.Millisecond, Reset: 250 * time.Millisecond}},
			{0, Decision{Next: 250 * time.Millisecond, Reset: 250 * time.Millisecond}},
			{260 * time.Millisecond, Decision{OK: true, Reset: 250 * time.Millisecond}},
		}},
		{"never holds more than the burst", 100, 2, []step{
			{time.Hour, Decision{OK: true, Remaining: 1, Reset: 10 * time.Millisecond}},
			{time.Hour, Decision{OK: true, Remaining: 0, Reset: 20 * time.Millisecond}},
			{time.Hour, Decision{Next: 10 * time.Millisecond, Reset: 20 * time.Millisecond}},
		}},
		{"an earlier now adds nothing", 10, 1, []step{
			{time.Second, Decision{OK: true, Reset: 100 * time.Millisecond}},
			{500 * time.Millisecond, Decision{Next: 100 * time.Millisecond, Reset: 100 * time.Millisecond}},
			{time.Second + 50*time.Millisecond, Decision{Next: 50 * time.Millisecond, Reset: 50 * time.Millisecond}},
		}},
		{"remaining counts whole tokens", 10, 3, []step{
			{0, Decision{OK: true, Remaining: 2, Reset: 100 * time.Millisecond}},
			{50 * time.Millisecond, Decision{OK: true, Remaining: 1, Reset: 150 * time.Millisecond}}, // 1.5 left
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(float64(tc.rate), tc.burst, t0)
			for i, s := range tc.steps {
				got := b.Take(at(s.at))
				// Float arithmetic may leave a nanosecond either way.
				if got.OK != s.want.OK || got.Remaining != s.want.Remaining || !near(got.Next, s.want.Next) || !near(got.Reset, s.want.Reset) {
					t.Errorf("step %d at %v: got %+v, want %+v", i, s.at, got, s.want)
				}
			}
		})
	}
}

func near(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

// TestBucketAdmitsNoMore drives a bucket with many requests at uneven times
// and checks the bound the goodput runs rely on.
func TestBucketAdmitsNoMore(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const rate, burst = 50, 5
	b := NewBucket(rate, burst, t0)
	admitted := 0
	var now time.Duration
	for i := range 10_000 {
		now += time.Duration(i%7) * 97 * time.Microsecond
		if b.Take(t0.Add(now)).OK {
			admitted++
		}
		if limit := burst + rate*now.Seconds(); float64(admitted) > limit+1e-9 {
			t.Fatalf("after %v: %d admitted, more than %.3f", now, admitted, limit)
		}
	}
	if want := burst + int(rate*now.Seconds()); admitted < want-1 {
		t.Errorf("after %v: %d admitted, want about %d: the bucket does not refill", now, admitted, want)
	}
}

func TestFormatReset(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{time.Nanosecond, "1ms"},
		{20 * time.Millisecond, "20ms"},
		{20*time.Millisecond + 1, "21ms"},
		{999*time.Millisecond + 1, "1s"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{1234567 * time.Microsecond, "1.235s"},
		{6 * time.Minute, "6m0s"},
		{90*time.Second + 500*time.Millisecond, "1m30.5s"},
	} {
		got := FormatReset(tc.d)
		if got != tc.want {
			t.Errorf("FormatReset(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back < tc.d {
			t.Errorf("FormatReset(%v) = %q reads back as %v, %v: earlier than the reset", tc.d, got, back, err)
		}
	}
}

func TestCeilUnits(t *testing.T) {
	for _, tc := range []struct {
		d, unit time.Duration
		want    int64
	}{
		{0, time.Millisecond, 1},
		{time.Nanosecond, time.Millisecond, 1},
		{time.Millisecond, time.Millisecond, 1},
		{time.Millisecond + 1, time.Millisecond, 2},
		{10 * time.Millisecond, time.Second, 1},
		{2*time.Second + 1, time.Second, 3},
	} {
		if got := ceilUnits(tc.d, tc.unit); got != tc.want {
			t.Errorf("ceilUnits(%v, %v) = %d, want %d", tc.d, tc.unit, got, tc.want)
		}
	}
}

// TestProviderHeaders sends three requests to a provider that admits two at
// once and one a second: the third is refused, and every answer carries the
// headers a client reads.
func TestProviderHeaders(t *testing.T) {
	p := NewProvider(1, 2)
	defer p.Close()
	base := BaseTransport(1)
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: base}
	type answer struct {
		status          int
		remaining       string
		retryAfterMs    string
		retryAfter      string
		reset           time.Duration
		body            []byte
		limit, bodyType string
	}
	var got []answer
	for range 3 {
		resp, err := client.Post(p.URL, "application/json", bytes.NewReader(chatRequest))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		reset, err := time.ParseDuration(resp.Header.Get("x-ratelimit-reset-requests"))
		if err != nil {
			t.Errorf("x-ratelimit-reset-requests: %v", err)
		}
		got = append(got, answer{
			status: resp.StatusCode, remaining: resp.Header.Get("x-ratelimit-remaining-requests"),
			retryAfterMs: resp.Header.Get("retry-after-ms"), retryAfter: resp.Header.Get("Retry-After"),
			reset: reset, body: body, limit: resp.Header.Get("x-ratelimit-limit-requests"),
			bodyType: resp.Header.Get("Content-Type"),
		})
	}
	for i, a := range got {
		if a.limit != "1" || a.bodyType != "application/json" {
			t.Errorf("answer %d: limit %q, Content-Type %q", i, a.limit, a.bodyType)
		}
	}
	if a := got[0]; a.status != 200 || a.remaining != "1" || !bytes.Equal(a.body, CompletionBody) || a.retryAfter != "" || a.retryAfterMs != "" {
		t.Errorf("first answer: %+v", a)
	}
	if a := got[1]; a.status != 200 || a.remaining != "0" || a.reset <= time.Second || a.reset > 2*time.Second {
		t.Errorf("second answer: %+v, want 200, 0 remaining, full again in 1-2 s", a)
	}
	a := got[2]
	ms, err := strconv.Atoi(a.retryAfterMs)
	if a.status != 429 || a.remaining != "0" || !bytes.Equal(a.body, RateLimitBody) || err != nil || ms < 900 || ms > 1000 || a.retryAfter != "1" {
		t.Errorf("third answer: %+v, want 429, retry-after-ms 900-1000, Retry-After 1", a)
	}
	if s := p.Stats(); s.Requests != 3 || s.Admitted != 2 || s.Limited != 1 || s.Conns != 1 {
		t.Errorf("stats %+v, want 3 requests, 2 admitted, 1 limited, 1 connection", s)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{d[:1], 0.99, 1},
		{d, 0.5, 50},
		{d, 0.99, 99},
		{d, 1, 100},
		{d[:3], 0.5, 2},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("percentile(%d values, %v) = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
		}
	}
}

func TestGoodputReportArithmetic(t *testing.T) {
	r := GoodputReport{Config: GoodputConfig{Rate: 100}, OK: 50, Wall: 2 * time.Second, Provider: ProviderStats{Requests: 125}}
	if got := r.Goodput(); got != 0.25 {
		t.Errorf("Goodput = %v, want 0.25", got)
	}
	if got := r.RequestsPerSuccess(); got != 2.5 {
		t.Errorf("RequestsPerSuccess = %v, want 2.5", got)
	}
	r.OK = 0
	if got := r.RequestsPerSuccess(); !math.IsInf(got, 1) {
		t.Errorf("RequestsPerSuccess with no success = %v, want +Inf", got)
	}
	if got := (GoodputConfig{Rate: 100, Burst: 10, Calls: 1000}).IdealWall(); got != 9900*time.Millisecond {
		t.Errorf("IdealWall = %v, want 9.9s", got)
	}
}

// ciGoodput is small enough that every row ends in seconds, even the ones
// whose retries all wait a whole second at once.
var ciGoodput = GoodputConfig{Rate: 200, Burst: 20, Workers: 16, Calls: 120, Timeout: 20 * time.Second}

// TestGoodputRows runs every row at CI size, all rows at once, each with its
// own provider, and checks what must hold whatever the tuning.
func TestGoodputRows(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: a few seconds")
	}
	cfg := ciGoodput
	for _, lib := range GoodputRows() {
		t.Run(lib.Name, func(t *testing.T) {
			t.Parallel()
			done := make(chan GoodputReport, 1)
			go func() { done <- Goodput(lib, cfg) }()
			var r GoodputReport
			select {
			case r = <-done:
			case <-time.After(cfg.Timeout + 10*time.Second):
				t.Fatalf("calls still running after %v: a call outlived its context", cfg.Timeout+10*time.Second)
			}
			checkGoodput(t, lib, cfg, r)
			t.Logf("%d ok, %d failed, %d requests, %d 429s, goodput %.3f, wall %v", r.OK, r.Failed, r.Provider.Requests, r.Provider.Limited, r.Goodput(), r.Wall)
		})
	}
}

func checkGoodput(t *testing.T, lib Lib, cfg GoodputConfig, r GoodputReport) {
	t.Helper()
	s := r.Provider
	// The report adds up.
	if r.Client != lib.Name || r.OK+r.Failed != cfg.Calls || r.Got429+r.Errors+r.GotOther != r.Failed || len(r.Latencies) != cfg.Calls {
		t.Errorf("report does not add up: %s, %d ok + %d failed (%d 429, %d errors, %d other) of %d calls, %d latencies",
			r.Client, r.OK, r.Failed, r.Got429, r.Errors, r.GotOther, cfg.Calls, len(r.Latencies))
	}
	if want := float64(r.OK) / r.Wall.Seconds() / float64(cfg.Rate); math.Abs(r.Goodput()-want) > 1e-12 {
		t.Errorf("Goodput = %v, want %v", r.Goodput(), want)
	}
	if r.OK > 0 && r.RequestsPerSuccess() != float64(s.Requests)/float64(r.OK) {
		t.Errorf("RequestsPerSuccess = %v, want %d / %d", r.RequestsPerSuccess(), s.Requests, r.OK)
	}
	// Every call ended, within its context and the wall.
	for i, d := range r.Latencies {
		if d <= 0 || d > cfg.Timeout+time.Second || d > r.Wall {
			t.Errorf("call %d took %v (timeout %v, wall %v)", i, d, cfg.Timeout, r.Wall)
			break
		}
	}
	if !(r.P50 <= r.P99 && r.P99 <= r.Max && r.Max <= r.Wall) {
		t.Errorf("p50 %v, p99 %v, max %v, wall %v: out of order", r.P50, r.P99, r.Max, r.Wall)
	}
	// The provider counted every request once, and each 200 reached one call.
	// (Not requests >= calls: a Cooldown may end a call without sending, R17.)
	if s.Requests != s.Admitted+s.Limited || int64(r.OK) > s.Requests || int64(r.OK) > s.Admitted || int64(r.Got429) > s.Limited {
		t.Errorf("provider %+v against %d calls, %d ok, %d handed a 429", s, cfg.Calls, r.OK, r.Got429)
	}
	// The bucket starts full: the first Burst calls cannot fail.
	if r.OK < min(cfg.Calls, cfg.Burst) {
		t.Errorf("%d calls ok, fewer than the burst of %d", r.OK, cfg.Burst)
	}
	// The provider never admitted more than its bucket allows (one token of
	// slack for requests racing for its lock with nearly equal clocks).
	if limit := float64(cfg.Burst) + float64(cfg.Rate)*s.AdmitSpan.Seconds() + 1; float64(s.Admitted) > limit {
		t.Errorf("provider admitted %d in %v, more than B + R × span = %.1f", s.Admitted, s.AdmitSpan, limit)
	}
	if !lib.Retries && (s.Requests != int64(cfg.Calls) || s.Admitted != int64(r.OK)) {
		t.Errorf("bare: %d requests and %d admitted for %d calls, %d ok", s.Requests, s.Admitted, cfg.Calls, r.OK)
	}
}
