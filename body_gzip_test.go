package retryhttp

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gemini45 is the retryDelay of geminiPerMinute and geminiPerDay.
const gemini45 = 45*time.Second + 837906927*time.Nanosecond

func gzipOf(t *testing.T, parts ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	require.NoError(t, err)
	for _, p := range parts {
		_, err = zw.Write(p)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return b.Bytes()
}

func zlibOf(t *testing.T, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	_, err := zw.Write(p)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// bomb is geminiPerMinute followed by 16 MiB of JSON whitespace, in gzip:
// about 20 KiB on the wire, well under maxDrain, for 16 MiB decompressed.
// Made once: deflate is slow under the race detector.
var bomb = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	must(err)
	_, err = zw.Write([]byte(geminiPerMinute))
	must(err)
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for range 16 {
		_, err = zw.Write(spaces)
		must(err)
	}
	must(zw.Close())
	return b.Bytes()
})

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// gzipCase is a row of TestBodyGzipErrorBody: the server's first answer is
// a JSON 429 whose body is body, sent with Content-Encoding encoding; the
// second is a 200 "ok".
type gzipCase struct {
	name       string
	encoding   string
	body       []byte
	budget     bool
	maxRetries int
	wantWaits  []time.Duration
	wantStatus int // what the caller gets; 0: an *Error
	wantErr    Error
}

// gzipErrorBodyCases are the rows of TestBodyGzipErrorBody.
func gzipErrorBodyCases(t *testing.T) []gzipCase {
	t.Helper()
	gz := gzipOf(t, []byte(geminiPerMinute))
	return []gzipCase{
		{name: "gzip: the body's retryDelay is the wait", encoding: "gzip", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
		{name: "x-gzip, any case: gzip", encoding: "X-GZip", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
		{name: "gzip bomb: the first 64 KiB are enough", encoding: "gzip", body: bomb(), maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
		{name: "gzip, public tier: fails fast with the body's ask", encoding: "gzip", body: gz, budget: true, maxRetries: 2,
			wantErr: Error{Tries: 1, Status: 429, RetryAfter: gemini45, Reason: OutOfTime, Err: ErrRateLimited}},
		{name: "gzip, per-day quota: handed back as sent, even on the public tier", encoding: "gzip", body: gzipOf(t, []byte(geminiPerDay)), budget: true, maxRetries: 2,
			wantStatus: 429},
		{name: "gzip, no retries: handed back as sent", encoding: "gzip", body: gz, maxRetries: 0,
			wantStatus: 429},
		{name: "deflate: not parsed, the backoff", encoding: "deflate", body: zlibOf(t, []byte(geminiPerMinute)), maxRetries: 2,
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200},
		{name: "br: not parsed, not even gzip inside", encoding: "br", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200},
		{name: "gzip, br: not parsed", encoding: "gzip, br", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200},
		{name: "identity: parsed as it is", encoding: "identity", body: []byte(geminiPerMinute), maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
	}
}

// A caller that sets Accept-Encoding: gzip itself gets the body as the
// server encoded it (net/http decompresses only what it asked for), so a
// Gemini 429 comes gzip'd. The transport reads its retryDelay all the same
// (R19), from at most 64 KiB decompressed, and the caller still gets every
// byte as the server sent it. Encodings other than gzip are not parsed.
func TestBodyGzipErrorBody(t *testing.T) {
	for _, tc := range gzipErrorBodyCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			require.LessOrEqual(t, len(tc.body), 64<<10, "the body must be read ahead")
			var n atomic.Int32
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) > 1 {
					io.WriteString(w, "ok")
					return
				}
				w.Header().Set("Content-Type", "application/json; charset=UTF-8")
				w.Header().Set("Content-Encoding", tc.encoding)
				w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)))
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write(tc.body)
			})
			// The client runs in a bubble: the real-time bound on the read
			// ahead (bodyTimeout) cannot run out while it reads from the
			// network, so the rows do not depend on how busy the machine is.
			synctest.Test(t, func(t *testing.T) {
				// Compression on: the caller's Accept-Encoding turns it off.
				base := &http.Transport{}
				defer base.CloseIdleConnections() // the bubble ends when its connections do
				clk := newClock()
				tr := New(base, WithClock(clk), WithBackoff(noJitter), WithMaxRetries(tc.maxRetries))
				ctx := context.Background()
				if tc.budget {
					ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
				}
				req := newRequest(t, ctx, http.MethodPost, srv.URL, []byte(`{"contents":[]}`))
				req.Header.Set("Accept-Encoding", "gzip")

				resp, err := tr.RoundTrip(req)
				if resp != nil {
					defer resp.Body.Close() // before the idle connections close, whatever fails
				}
				assertWaits(t, tc.wantWaits, clk.Waits())
				if tc.wantStatus == 0 {
					require.Nil(t, resp)
					var e *Error
					require.ErrorAs(t, err, &e)
					assert.Equal(t, tc.wantErr, *e)
					return
				}
				require.NoError(t, err)
				got, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, tc.wantStatus, resp.StatusCode)
				if tc.wantStatus == 200 {
					assert.Equal(t, "ok", string(got))
					return
				}
				assert.False(t, resp.Uncompressed, "net/http left the body as sent")
				assert.Equal(t, tc.encoding, resp.Header.Get("Content-Encoding"))
				assert.True(t, bytes.Equal(tc.body, got), "the body handed back: every byte as the server sent it (R19): %d bytes, want %d", len(got), len(tc.body))
			})
		})
	}
}

// A gzip bomb costs what a plain body does: errorBody decompresses at most
// 64 KiB, and allocates accordingly, whatever the body would expand to.
func TestErrorBodyGzipBomb(t *testing.T) {
	raw := bomb()
	h := http.Header{"Content-Encoding": {"gzip"}}
	errorBody(h, raw) // warm up what is allocated once

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := errorBody(h, raw)
	runtime.ReadMemStats(&after)

	assert.Equal(t, 64<<10, len(got), "bytes decompressed: 64 KiB, no more")
	assert.Equal(t, BodyHint{RetryAfter: gemini45}, ParseErrorBody(got))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated for a 16 MiB bomb")
}

// errorBody's rules, without a connection.
func TestErrorBody(t *testing.T) {
	gz := gzipOf(t, []byte(geminiPerMinute))
	// A gzip stream cut short after the JSON, flushed: what decompresses.
	var cut bytes.Buffer
	zw := gzip.NewWriter(&cut)
	_, err := zw.Write([]byte(geminiPerMinute))
	require.NoError(t, err)
	require.NoError(t, zw.Flush())
	flushed := cut.Len()
	_, err = zw.Write(bytes.Repeat([]byte("x"), 4<<10))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	for _, tc := range []struct {
		name   string
		header http.Header
		raw    []byte
		want   []byte
	}{
		{"no Content-Encoding", http.Header{}, []byte(geminiPerMinute), []byte(geminiPerMinute)},
		{"identity", headerOf("Content-Encoding", " identity "), []byte("{}"), []byte("{}")},
		{"gzip", headerOf("Content-Encoding", "gzip"), gz, []byte(geminiPerMinute)},
		{"gzip, spaced and capitalized", headerOf("Content-Encoding", " GZIP "), gz, []byte(geminiPerMinute)},
		{"x-gzip", headerOf("Content-Encoding", "x-gzip"), gz, []byte(geminiPerMinute)},
		{"gzip cut short: what decompresses", headerOf("Content-Encoding", "gzip"), cut.Bytes()[:flushed], []byte(geminiPerMinute)},
		{"gzip, but not gzip", headerOf("Content-Encoding", "gzip"), []byte(geminiPerMinute), nil},
		{"gzip, empty", headerOf("Content-Encoding", "gzip"), nil, nil},
		{"deflate", headerOf("Content-Encoding", "deflate"), zlibOf(t, []byte(geminiPerMinute)), nil},
		{"two codings", headerOf("Content-Encoding", "gzip", "Content-Encoding", "gzip"), gz, nil},
		{"a list of codings", headerOf("Content-Encoding", "gzip, identity"), gz, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errorBody(tc.header, tc.raw)
			if tc.want == nil {
				assert.Zero(t, len(got), "bytes to parse: none")
				return
			}
			assert.Equal(t, string(tc.want), string(got))
		})
	}
}
