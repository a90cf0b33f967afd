//go:build !race

package retryhttp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TestHappyPathAllocatesNothing checks R16 as a count, not a time: a
// first-try success with default options allocates nothing beyond the base,
// with or without a Budget. (The race detector allocates on its own, hence
// the build tag; benchmarks report the same number with -benchmem.)
func TestHappyPathAllocatesNothing(t *testing.T) {
	ok := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	var base http.RoundTripper = roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no budget", context.Background()},
		{"budget", WithBudget(context.Background(), NewBudget(PublicTierMaxWait))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(base)
			req := newRequest(t, tc.ctx, http.MethodPost, "https://api.example.com/v1/chat?key=x", []byte(`{"q":1}`))
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("first-try success allocates %v times per call, want 0", allocs)
			}
		})
	}
}

// TestSlowPathCallOnTheStack: a success through the slow path (an
// Observer) allocates only the redacted URL the Observer gets: the call
// stays on RoundTrip's stack. (A key function's panic cleanup held the call
// in an io.Closer, and every such call cost 944 B more.)
func TestSlowPathCallOnTheStack(t *testing.T) {
	ok := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	tr := New(base, WithObserver(func(context.Context, Attempt) {}), WithCooldown(NewCooldown(nil)))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1", nil)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("a success with an Observer allocates %v times per call, want 1 (its URL)", allocs)
	}
}

// TestCooldownHappyPathAllocatesNothing: with a Cooldown, a first-try
// success allocates nothing: one that states no limit (its key left
// unwatched, R16), one to a key while another key is watched, and one
// whose provider states its limit (OpenAI's headers, counts well above
// zero: its key is watched and each send takes its slot, R27; a call every
// 130 ms, below the stated 500 a minute, finds its slot free).
func TestCooldownHappyPathAllocatesNothing(t *testing.T) {
	plain := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name    string
		headers http.Header
		watched string // a key the Cooldown watches
		keys    int    // the keys it watches after
	}{
		{"nothing stated, nothing watched", plain, "", 0},
		{"nothing stated, another key watched", plain, "https://other.example.com", 1},
		{"a limit stated", openAIHeaders(), "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := &http.Response{StatusCode: 200, Body: http.NoBody, Header: tc.headers}
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
			clk := newBenchClock()
			cd := NewCooldown(nil)
			tr := New(base, WithCooldown(cd), WithClock(clk))
			if tc.watched != "" {
				holdFor(cd, tc.watched, clk.Now(), time.Hour)
			}
			req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"q":1}`))
			allocs := testing.AllocsPerRun(1000, func() {
				clk.now = clk.now.Add(130 * time.Millisecond)
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("first-try success allocates %v times per call, want 0", allocs)
			}
			if got := cd.size(); got != tc.keys {
				t.Errorf("the Cooldown watches %d keys, want %d", got, tc.keys)
			}
		})
	}
}

// TestCooldownByModelHappyPathAllocatesNothing: with a Cooldown keyed by
// KeyByModel, a first-try success allocates nothing while no key of its
// host is watched, whether or not another host's is (R16): its body is
// not read. A call to a host that has a watched key reads its model on the
// slow path: what that costs is logged, and bounded.
func TestCooldownByModelHappyPathAllocatesNothing(t *testing.T) {
	ok := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	var base http.RoundTripper = roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	for _, tc := range []struct {
		name    string
		url     string
		watched string // a key the Cooldown watches
		most    float64
	}{
		{"nothing watched", openAIChat, "", 0},
		{"another host watched", openAIChat, "https://api.anthropic.com/claude-sonnet-4-5", 0},
		{"another model of the host watched", openAIChat, "https://api.openai.com/o3", 12},
		{"another model of the host watched, Gemini's path", geminiAPI + "gemini-2.0-flash:generateContent", "https://generativelanguage.googleapis.com/gemini-2.5-pro", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(KeyByModel)
			tr := New(base, WithCooldown(cd))
			if tc.watched != "" {
				holdFor(cd, tc.watched, time.Now(), time.Hour)
			}
			req := newRequest(t, context.Background(), http.MethodPost, tc.url, []byte(`{"model":"gpt-4o","messages":[]}`))
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s: %v allocations per call", tc.name, allocs)
			if allocs > tc.most {
				t.Errorf("first-try success allocates %v times per call, want %v at most", allocs, tc.most)
			}
		})
	}
}

// TestWithSlogDisabledLevelAllocates: a retried call under WithSlog whose
// Handler enables no level allocates what it does with no logger.
func TestWithSlogDisabledLevelAllocates(t *testing.T) {
	allocs := func(opts ...Option) float64 {
		base := &benchFlaky{fail: benchResponse(http.StatusServiceUnavailable), ok: benchResponse(http.StatusOK)}
		tr := New(base, append([]Option{WithClock(newBenchClock())}, opts...)...)
		req, err := http.NewRequest(http.MethodGet, "https://api.example.com/v1/chat", nil)
		require.NoError(t, err)
		return testing.AllocsPerRun(100, func() {
			if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("want a 200 after one retry, got %v, %v", resp, err)
			}
		})
	}
	assert.Equal(t, allocs(), allocs(WithSlog(slog.New(newSlogRecorder(slog.LevelError)))), "allocations per call")
}

// TestMemoryFlat: 100,000 calls, each retried once (a 503, then a 200),
// leave the heap where it was (R16): nothing of a call outlives it. The
// base answers with fresh responses, as a real one does, so what would pile
// up is the transport's own.
func TestMemoryFlat(t *testing.T) {
	var n int
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		n++
		if n%2 == 1 {
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody}, nil
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	tr := New(base, WithBackoff(Backoff{}), WithObserver(func(context.Context, Attempt) {}))
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"q":1}`))
	call := func() {
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v", resp, err)
		}
	}
	for range 100_000 { // warm up: pools, the first of everything
		call()
	}
	before := heapAfterGC()
	for range 100_000 {
		call()
	}
	growth := heapAfterGC() - before
	t.Logf("heap after 100,000 more retried calls: %+d bytes", growth)
	if growth > 256<<10 {
		t.Errorf("the heap grew by %d bytes over 100,000 calls, want it flat (under 256 KiB of the runtime's own noise)", growth)
	}
}

func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers let go
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// Benchmarks of what every request pays. They measure; they assert
// nothing about time. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 6 | benchstat -
//
// and see bench/ for the same scenarios side by side with other libraries.
// R16 is the line to hold: BenchmarkHappyPath/default and /budget report
// 0 allocs/op, and their ns/op minus BenchmarkBare's is the whole cost of the
// transport on a first-try success.

// benchStub is a base that answers every request with one shared response, so
// a benchmark measures the transport and nothing else: the stub allocates
// nothing. It puts the Body back each time, since a transport may wrap it
// (WithTryTimeout does) and the wrappers must not pile up across calls.
type benchStub struct{ resp *http.Response }

func (s *benchStub) RoundTrip(*http.Request) (*http.Response, error) {
	s.resp.Body = http.NoBody
	return s.resp, nil
}

// benchBase returns the stub as an http.RoundTripper, as the Transport holds
// its base. It is not inlined, so BenchmarkBare cannot devirtualize (and then
// inline away) the call that every other benchmark pays.
//
//go:noinline
func benchBase() http.RoundTripper {
	return &benchStub{resp: benchResponse(http.StatusOK)}
}

func benchResponse(status int) *http.Response {
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody,
	}
}

// openAIHeaders are what OpenAI sends with a success.
func openAIHeaders() http.Header {
	return http.Header{
		"Content-Type":                   {"application/json"},
		"Openai-Processing-Ms":           {"412"},
		"X-Request-Id":                   {"req_0123456789abcdef"},
		"X-Ratelimit-Limit-Requests":     {"500"},
		"X-Ratelimit-Limit-Tokens":       {"30000"},
		"X-Ratelimit-Remaining-Requests": {"499"},
		"X-Ratelimit-Remaining-Tokens":   {"29950"},
		"X-Ratelimit-Reset-Requests":     {"120ms"},
		"X-Ratelimit-Reset-Tokens":       {"100ms"},
	}
}

// plainHeaders are what a provider that states no limit sends with a
// success (Gemini's, less its values' variety): a Cooldown looks them over
// for a stated limit (R27) and finds none.
func plainHeaders() http.Header {
	return http.Header{
		"Content-Type":           {"application/json; charset=UTF-8"},
		"Date":                   {"Fri, 04 Dec 2026 12:00:00 GMT"},
		"Server":                 {"scaffolding on HTTPServer2"},
		"Server-Timing":          {"gfet4t7; dur=412"},
		"Vary":                   {"Origin", "X-Origin", "Referer"},
		"X-Content-Type-Options": {"nosniff"},
		"X-Frame-Options":        {"SAMEORIGIN"},
		"X-Xss-Protection":       {"0"},
	}
}

const benchURL = "https://api.example.com/v1/chat/completions"

func benchGet(b *testing.B, ctx context.Context) *http.Request {
	b.Helper()
	return benchGetURL(b, ctx, benchURL)
}

func benchGetURL(b *testing.B, ctx context.Context, url string) *http.Request {
	b.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

// BenchmarkBare is the base alone, called through an interface as the
// Transport calls it: the floor the other benchmarks are read against.
func BenchmarkBare(b *testing.B) {
	base := benchBase()
	req := benchGet(b, context.Background())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := base.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}

// floorWrapper is the least a retrying RoundTripper can do on a first-try
// success: call the base, look at the status, return. R16 holds the
// Transport to 2x its cost (bench/ keeps the same floor beside the other
// libraries).
type floorWrapper struct{ base http.RoundTripper }

func (f *floorWrapper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.base.RoundTrip(r)
	if err == nil && resp.StatusCode < 400 {
		return resp, nil
	}
	return resp, err
}

// BenchmarkFloor is floorWrapper over the stub: the line R16 measures the
// Transport against.
func BenchmarkFloor(b *testing.B) {
	for _, url := range []string{"https", "http"} {
		b.Run(url, func(b *testing.B) {
			var tr http.RoundTripper = &floorWrapper{base: benchBase()}
			req := benchGetURL(b, context.Background(), url+"://api.example.com/v1/chat/completions")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// happyCases are the options a first-try success is measured with.
func happyCases() []struct {
	name string
	ctx  context.Context
	opts []Option
} {
	budget := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))
	return []struct {
		name string
		ctx  context.Context
		opts []Option
	}{
		{"default", context.Background(), nil},
		{"budget", budget, nil},
		{"quota", context.Background(), []Option{WithQuota(NewQuota(10, 0.1))}},
		{"cooldown", context.Background(), []Option{WithCooldown(NewCooldown(nil))}},
		{"observer", context.Background(), []Option{WithObserver(func(context.Context, Attempt) {})}},
	}
}

// BenchmarkHappyPath is a first-try success (R16). default and budget are the
// rule's two cases; the others show what an option adds to the happy path.
func BenchmarkHappyPath(b *testing.B) {
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, bc := range benchHappyCases(deadline) {
		b.Run(bc.name, func(b *testing.B) {
			base := benchBase()
			if bc.name == "cooldown+plain-headers" {
				base.(*benchStub).resp.Header = plainHeaders()
			}
			tr := New(base, bc.opts...)
			url := benchURL
			if bc.name == "http" {
				url = "http://api.example.com/v1/chat/completions"
			}
			req := benchGetURL(b, bc.ctx, url)
			if strings.HasPrefix(bc.name, "cooldown-by-model") {
				req = benchPost(b, `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hi."}],"max_tokens":16}`)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close() // ends the try's context with WithTryTimeout
			}
		})
	}
}

// benchHappyCases are happyCases and the options only BenchmarkHappyPath
// measures; deadline is a context with a deadline an hour away.
func benchHappyCases(deadline context.Context) []struct {
	name string
	ctx  context.Context
	opts []Option
} {
	cases := append(happyCases(), []struct {
		name string
		ctx  context.Context
		opts []Option
	}{
		{"http", context.Background(), nil}, // the same as default, on an http:// URL
		{"deadline", deadline, nil},
		{"budget+deadline+quota", WithBudget(deadline, NewBudget(PublicTierMaxWait)), []Option{WithQuota(NewQuota(10, 0.1))}},
		{"try-timeout", context.Background(), []Option{WithTryTimeout(time.Minute)}},
	}...)
	// A Cooldown whose provider states no limit (its headers looked over,
	// R27), and with another key watched (a success that states its limit
	// arms its key: BenchmarkStatedLimit measures that). Keyed
	// by model (KeyByModel, a POST of a JSON body): with nothing watched,
	// with a model of another host watched whose name is as long (neither
	// reads the body; the host's key is built and looked up), and with
	// another model of the same host watched (its model is read, on the
	// slow path).
	watching := NewCooldown(nil)
	holdFor(watching, "https://other.example.com", time.Now(), time.Hour)
	byModel := func(watched string) []Option {
		cd := NewCooldown(KeyByModel)
		if watched != "" {
			holdFor(cd, watched, time.Now(), time.Hour)
		}
		return []Option{WithCooldown(cd)}
	}
	return append(cases, []struct {
		name string
		ctx  context.Context
		opts []Option
	}{
		{"cooldown+plain-headers", context.Background(), []Option{WithCooldown(NewCooldown(nil))}},
		{"cooldown+other-key-watched", context.Background(), []Option{WithCooldown(watching)}},
		{"cooldown-by-model", context.Background(), byModel("")},
		{"cooldown-by-model+other-host-watched", context.Background(), byModel("https://api.example.net/gpt-4o")},
		{"cooldown-by-model+other-model-watched", context.Background(), byModel("https://api.example.com/o3")},
	}...)
}

// benchPost is a POST of a JSON body to benchURL, as an SDK makes it
// (GetBody set).
func benchPost(b *testing.B, body string) *http.Request {
	b.Helper()
	req, err := http.NewRequest(http.MethodPost, benchURL, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// benchShared answers every request with one response it never writes to,
// so that goroutines calling it at once share nothing but what the
// Transport shares: the parallel benchmarks measure the Transport's scaling.
type benchShared struct{ resp *http.Response }

func (s *benchShared) RoundTrip(*http.Request) (*http.Response, error) { return s.resp, nil }

// BenchmarkHappyParallel is a first-try success from every core at once, for
// each option (R16: no option may stop scaling with cores). Run it with
// -cpu 1,2 and compare each option with itself: at 2 procs, ns/op should be
// about half of 1 proc's.
func BenchmarkHappyParallel(b *testing.B) {
	for _, bc := range happyCases() {
		b.Run(bc.name, func(b *testing.B) {
			tr := New(&benchShared{resp: benchResponse(http.StatusOK)}, bc.opts...)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := benchGet(b, bc.ctx) // a request per goroutine, as callers have
				for pb.Next() {
					if _, err := tr.RoundTrip(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkStatedLimit is a first-try success on a key whose provider
// states its limit (OpenAI's headers: 500 requests a minute), one call
// each 130 ms on benchClock (below the limit: each finds its slot free),
// beside the same with no Cooldown and with a Cooldown whose provider
// states nothing. Reading the counts and taking the slot is what R27's
// fan-out without a storm costs a key whose limit was stated.
func BenchmarkStatedLimit(b *testing.B) {
	for _, bc := range []struct {
		name    string
		cd      bool
		headers http.Header
	}{
		{"no-cooldown", false, openAIHeaders()},
		{"cooldown+none-stated", true, http.Header{"Content-Type": {"application/json"}}},
		{"cooldown+stated", true, openAIHeaders()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			base := benchBase()
			base.(*benchStub).resp.Header = bc.headers
			clk := newBenchClock()
			opts := []Option{WithClock(clk)}
			if bc.cd {
				opts = append(opts, WithCooldown(NewCooldown(nil)))
			}
			tr := New(base, opts...)
			req := benchGet(b, context.Background())
			b.ReportAllocs()
			for b.Loop() {
				clk.now = clk.now.Add(130 * time.Millisecond)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// benchFlaky answers 503 and then 200, over and over: each RoundTrip of the
// Transport makes one retry.
type benchFlaky struct {
	fail, ok *http.Response
	n        int
}

func (s *benchFlaky) RoundTrip(*http.Request) (*http.Response, error) {
	s.n++
	if s.n%2 == 1 {
		s.fail.Body = http.NoBody // drained and closed by the transport
		return s.fail, nil
	}
	return s.ok, nil
}

// benchClock is a mock clock whose timers have already fired: a wait costs
// no real time and, unlike clock.Mock, needs no second goroutine to advance
// it, so the benchmark measures the retry path and not a hand-off. Now moves
// by each wait. It allocates nothing.
type benchClock struct {
	clock.Clock // only Now, Since and Timer are used by the transport here
	now         time.Time
	fired       chan time.Time
	timer       *clock.Timer
}

func newBenchClock() *benchClock {
	c := &benchClock{now: benchEpoch, fired: make(chan time.Time, 1)}
	c.timer = &clock.Timer{C: c.fired}
	return c
}

func (c *benchClock) Now() time.Time                  { return c.now }
func (c *benchClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

// Timer fires at once: the transport reads C and never calls Stop.
func (c *benchClock) Timer(d time.Duration) *clock.Timer {
	c.now = c.now.Add(d)
	c.fired <- c.now
	return c.timer
}

// BenchmarkRetryOnce is one call that gets a 503 and then a 200: one backoff
// (on benchClock, so no real wait), a drain, a clone. logger adds a zap JSON
// logger writing to io.Discard, to show what the R14 Warn entry costs; slog
// the same through WithSlog and a slog JSON Handler.
func BenchmarkRetryOnce(b *testing.B) {
	discard := zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.WarnLevel))
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"logger", []Option{WithLogger(discard)}},
		{"slog", []Option{WithSlog(slog.New(slog.NewJSONHandler(io.Discard, nil)))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			base := &benchFlaky{fail: benchResponse(http.StatusServiceUnavailable), ok: benchResponse(http.StatusOK)}
			tr := New(base, append([]Option{WithClock(newBenchClock())}, bc.opts...)...)
			req := benchGet(b, context.Background())
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, want 200 after one retry", resp.StatusCode)
				}
			}
			if base.n%2 != 0 {
				b.Fatalf("base saw %d tries, want an even number (503, 200 per call)", base.n)
			}
		})
	}
}

// BenchmarkParseRetryAfter covers every form R5 accepts, and two it rejects.
func BenchmarkParseRetryAfter(b *testing.B) {
	now := benchEpoch
	at := now.Add(30 * time.Second).UTC()
	for _, bc := range []struct{ name, key, value string }{
		{"absent", "", ""},
		{"ms", "Retry-After-Ms", "1500"},
		{"seconds", "Retry-After", "2"},
		{"decimal", "Retry-After", "1.5"},
		{"imf-fixdate", "Retry-After", at.Format(http.TimeFormat)},
		{"rfc850", "Retry-After", at.Format(time.RFC850)},
		{"asctime", "Retry-After", at.Format(time.ANSIC)},
		{"invalid", "Retry-After", "soon"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := http.Header{}
			if bc.key != "" {
				h.Set(bc.key, bc.value)
			}
			_, wantOK := ParseRetryAfter(h, now)
			if wantOK != (bc.name != "absent" && bc.name != "invalid") {
				b.Fatalf("ParseRetryAfter(%s: %q) ok = %v", bc.key, bc.value, wantOK)
			}
			b.ReportAllocs()
			for b.Loop() {
				benchSinkDuration, benchSinkOK = ParseRetryAfter(h, now)
			}
		})
	}
}

// BenchmarkBackoffDelay is the pure delay computation of R4: the first retry,
// the second, and one far past the cap.
func BenchmarkBackoffDelay(b *testing.B) {
	for _, retry := range []int{1, 2, 30} {
		b.Run("retry="+strconv.Itoa(retry), func(b *testing.B) {
			b.ReportAllocs()
			random := 0.0
			for b.Loop() {
				benchSinkDuration = DefaultBackoff.Delay(retry, random)
				random += 0.125
				if random >= 1 {
					random = 0
				}
			}
		})
	}
}

var (
	benchSinkDuration time.Duration
	benchSinkOK       bool
)

// benchEpoch is where benchClock starts, and the "now" of the parsers.
var benchEpoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// BenchmarkMemoryLoopback: calls over a real loopback connection, each
// answered 503 then 200 (one retry, a drained error page, one connection
// reused), reporting how much the heap grew across them (R16: flat beyond
// The first connection's buffers). For the figure in bench/RESULTS.md:
//
//	go test -run '^$' -bench MemoryLoopback -benchtime 100000x .
func BenchmarkMemoryLoopback(b *testing.B) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"type":"overloaded_error"}}`)
			return
		}
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := New(base, WithClock(newBenchClock()))
	call := func() {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	call() // the connection and its buffers
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		call()
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "heap-growth-B")
}

// TestStreamRetryAllocs: with WithStreamRetry, a success that is not an
// event stream costs a header check and allocates nothing (R16, R26); a
// healthy stream's read ahead allocates its body (the bytes read ahead)
// and, with a first token's bound, its timer on the clock.
func TestStreamRetryAllocs(t *testing.T) {
	const opening = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	body := &replayBody{data: opening}
	for _, tc := range []struct {
		name       string
		stream     bool
		firstToken time.Duration
		max        float64
	}{
		{"JSON", false, 2 * time.Second, 0},
		{"a stream, no bound", true, 0, 1},
		{"a stream, 2 s bound", true, 2 * time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
			if tc.stream {
				resp.Header = http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
			}
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				body.off = 0
				resp.Body = body
				return resp, nil
			})
			tr := New(base, WithStreamRetry(tc.firstToken))
			req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/messages", nil)
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > tc.max {
				t.Errorf("allocates %v times per call, want %v at most", allocs, tc.max)
			}
		})
	}
}

// replayBody is a body a test can read again: rewound by setting off.
type replayBody struct {
	data string
	off  int
}

func (b *replayBody) Read(p []byte) (int, error) {
	if b.off == len(b.data) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	return n, nil
}

func (b *replayBody) Close() error { return nil }

// What WithStreamRetry costs a healthy stream (R26): the read ahead to the
// first token, its allocations, and the throughput of the stream once
// handed over. Each benchmark runs the same stream under every transport as
// sub-benchmarks (lib=...), so that -count interleaves them and benchstat
// compares them side by side:
//
//	go test -run '^$' -bench 'Stream' -benchmem -count 6 . | benchstat -col /lib -

// benchStreamLibs are the transports a stream is read through: the base
// alone, retryhttp without the option, and with it (with no bound on the
// first token, and with one of 2 s, a timer on the clock).
func benchStreamLibs(base http.RoundTripper) []struct {
	name string
	rt   http.RoundTripper
} {
	return []struct {
		name string
		rt   http.RoundTripper
	}{
		{"lib=bare", base},
		{"lib=retryhttp", New(base)},
		{"lib=stream", New(base, WithStreamRetry(0))},
		{"lib=stream+2s", New(base, WithStreamRetry(2*time.Second))},
	}
}

// benchAnthropicStream is a healthy Anthropic stream of 40 tokens: its
// opening, its first token, the rest.
var benchAnthropicStream = func() string {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	for range 40 {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n")
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}()

// benchStreamStub answers every request with one event stream, read from
// memory: a benchmark over it measures the transports and nothing else.
type benchStreamStub struct {
	resp *http.Response
	body *strings.Reader
}

func newBenchStreamStub(stream string) *benchStreamStub {
	r := benchResponse(http.StatusOK)
	r.Header = http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Request-Id": {"req_011CPxyz"}}
	return &benchStreamStub{resp: r, body: strings.NewReader(stream)}
}

func (s *benchStreamStub) RoundTrip(*http.Request) (*http.Response, error) {
	_, _ = s.body.Seek(0, io.SeekStart) // a bytes.Reader's Seek to 0 never fails
	s.resp.Body = io.NopCloser(s.body)
	return s.resp, nil
}

// BenchmarkStreamReadAhead is a healthy stream read whole through each
// transport, over a stub: lib=stream's ns/op less lib=retryhttp's is the
// read ahead's own cost, and its allocs/op less lib=bare's what it
// allocates (R26: its body, and with a bound the timer).
func BenchmarkStreamReadAhead(b *testing.B) {
	stub := newBenchStreamStub(benchAnthropicStream)
	req := benchPost(b, `{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true}`)
	buf := make([]byte, 32<<10)
	for _, lib := range benchStreamLibs(stub) {
		b.Run(lib.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchAnthropicStream)))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := lib.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkStreamLoopback is the same stream over a loopback connection
// (HTTP/1.1, kept alive): a call as an SDK makes it, allocations included.
func BenchmarkStreamLoopback(b *testing.B) {
	benchStreamOver(b, benchAnthropicStream)
}

// BenchmarkStreamThroughput is a 1 MiB stream over loopback, read whole
// once handed over: its MB/s through the read ahead's body against the
// base's own (R26: at least 0.95 of it), the call included.
func BenchmarkStreamThroughput(b *testing.B) {
	benchStreamOver(b, benchBigStream)
}

// BenchmarkStreamReadAfterHandOver is the same 1 MiB stream from memory,
// timed only from the hand-over to its end: what the read ahead's body
// costs each Read, with no network to hide it in.
func BenchmarkStreamReadAfterHandOver(b *testing.B) {
	stub := newBenchStreamStub(benchBigStream)
	req := benchPost(b, `{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true}`)
	buf := make([]byte, 32<<10)
	for _, lib := range benchStreamLibs(stub) {
		b.Run(lib.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchBigStream)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				resp, err := lib.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// benchBigStream is a healthy Anthropic stream of 1 MiB.
var benchBigStream = func() string {
	var big strings.Builder
	opening, _, _ := strings.Cut(benchAnthropicStream, "event: content_block_delta")
	big.WriteString(opening)
	for big.Len() < 1<<20 {
		big.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"tokens, tokens, tokens\"}}\n\n")
	}
	return big.String()
}()

func benchStreamOver(b *testing.B, stream string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	buf := make([]byte, 32<<10)
	for _, lib := range benchStreamLibs(base) {
		b.Run(lib.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{"stream":true}`))
				resp, err := lib.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
