package retryhttp

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// slogRecorder is a slog.Handler that keeps every record it is given and
// counts the Enabled calls; it enables min and above.
type slogRecorder struct {
	min  slog.Level
	pre  []slog.Attr // from WithAttrs
	seen *slogSeen   // shared with the Handlers WithAttrs makes
}

type slogSeen struct {
	mu      sync.Mutex
	enabled int
	records []slogEntry
}

// slogEntry is a record as the Handler got it: its attributes in order.
type slogEntry struct {
	level slog.Level
	msg   string
	attrs []slog.Attr
	time  time.Time
}

func newSlogRecorder(lowest slog.Level) *slogRecorder {
	return &slogRecorder{min: lowest, seen: &slogSeen{}}
}

func (h *slogRecorder) Enabled(_ context.Context, l slog.Level) bool {
	h.seen.mu.Lock()
	h.seen.enabled++
	h.seen.mu.Unlock()
	return l >= h.min
}

func (h *slogRecorder) Handle(_ context.Context, r slog.Record) error {
	e := slogEntry{level: r.Level, msg: r.Message, attrs: append([]slog.Attr(nil), h.pre...), time: r.Time}
	r.Attrs(func(a slog.Attr) bool {
		e.attrs = append(e.attrs, a)
		return true
	})
	h.seen.mu.Lock()
	h.seen.records = append(h.seen.records, e)
	h.seen.mu.Unlock()
	return nil
}

func (h *slogRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &slogRecorder{min: h.min, pre: append(append([]slog.Attr(nil), h.pre...), attrs...), seen: h.seen}
}

func (h *slogRecorder) WithGroup(string) slog.Handler { return h } // the transport makes no group

func (h *slogRecorder) entries() []slogEntry {
	h.seen.mu.Lock()
	defer h.seen.mu.Unlock()
	return append([]slogEntry(nil), h.seen.records...)
}

func (h *slogRecorder) enabledCalls() int {
	h.seen.mu.Lock()
	defer h.seen.mu.Unlock()
	return h.seen.enabled
}

// logKV is one field of an entry: its name, and its value as a Go value of
// the field's kind (int64 for zap.Int and slog.Int64, string for strings).
type logKV struct {
	Key   string
	Value any
}

type logLine struct {
	Warn   bool
	Msg    string
	Fields []logKV
}

// zapLines is what a zap observer recorded, fields in order.
func zapLines(logs *observer.ObservedLogs) []logLine {
	var out []logLine
	for _, e := range logs.All() {
		l := logLine{Warn: e.Level == zapcore.WarnLevel, Msg: e.Message}
		for _, f := range e.Context {
			enc := zapcore.NewMapObjectEncoder()
			f.AddTo(enc)
			l.Fields = append(l.Fields, logKV{f.Key, enc.Fields[f.Key]})
		}
		out = append(out, l)
	}
	return out
}

// slogLines is what a slogRecorder got, in the same form.
func slogLines(h *slogRecorder) []logLine {
	var out []logLine
	for _, e := range h.entries() {
		l := logLine{Warn: e.level == slog.LevelWarn, Msg: e.msg}
		for _, a := range e.attrs {
			l.Fields = append(l.Fields, logKV{a.Key, a.Value.Any()})
		}
		out = append(out, l)
	}
	return out
}

// logCall runs one call of a POST over a Script of rs with opts; with
// cancel, the caller cancels a millisecond into the first wait.
func logCall(rs replies, cancel bool) func(t *testing.T, opts ...Option) {
	return func(t *testing.T, opts ...Option) {
		t.Helper()
		clk, _, tr := scripted(rs, opts...)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		if cancel {
			clk.AfterFunc(time.Millisecond, stop)
		}
		if resp, _ := tr.RoundTrip(newRequest(t, ctx, "POST", "https://api.example.com/v1/chat?key=k", []byte("{}"))); resp != nil {
			resp.Body.Close()
		}
	}
}

// TestWithSlogSameEntries: every kind of entry reaches a slog Handler as it
// reaches a zap logger: Warn, the same message, the same fields in the same
// order, each value of the same kind (R14, R17).
func TestWithSlogSameEntries(t *testing.T) {
	fail := retryhttptest.Fail(errRefused)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, opts ...Option)
		msgs []string // the entries, as a check that the rows log what they say
	}{
		{"retries and a give-up after transport errors", logCall(replies{fail, fail, fail}, false),
			[]string{msgRetrying, msgRetrying, msgGivingUp}},
		{"a retry after Retry-After", logCall(replies{reply(429, "Retry-After", "2"), reply(200)}, false),
			[]string{msgRetrying}},
		{"retries and a give-up after a body's retryDelay", logCall(replies{gemini429(), gemini429(), gemini429()}, false),
			[]string{msgRetrying, msgRetrying, msgGivingUp}},
		{"canceled during a wait", logCall(replies{reply(503), reply(200)}, true),
			[]string{msgRetrying, msgGivingUp}},
		{"a Cooldown's hold", allLogEntryKinds,
			[]string{msgRetrying, msgGivingUp, msgHolding}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zl, logs := logSink()
			tc.run(t, WithLogger(zl))
			rec := newSlogRecorder(slog.LevelDebug)
			tc.run(t, WithSlog(slog.New(rec)))

			want, got := zapLines(logs), slogLines(rec)
			var msgs []string
			for _, l := range want {
				msgs = append(msgs, l.Msg)
				assert.Equal(t, l.Msg != msgHolding, l.Warn, "%s: Warn but for a hold (Info: the Cooldown at work)", l.Msg)
			}
			require.Equal(t, tc.msgs, msgs, "the zap entries")
			assert.Equal(t, want, got, "the slog records are the zap entries")
			for _, e := range rec.entries() {
				assert.False(t, e.time.IsZero(), "%s: a time", e.msg)
			}
		})
	}
}

// TestWithSlogSecrets: what reaches a slog Handler holds no query,
// userinfo, credential header value or body either (R14): it is the same
// entry.
func TestWithSlogSecrets(t *testing.T) {
	for _, tc := range []struct {
		name string
		base func(*http.Request) (*http.Response, error)
	}{
		{"503 with secrets in body and headers", func(*http.Request) (*http.Response, error) {
			return respond(503, secRespBody, "Set-Cookie", secCookie, "X-Request-Echo", secAuth), nil
		}},
		{"*url.Error with the full URL", secURLError("", syscall.ECONNRESET)},
		{"error echoing the credential headers", func(r *http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("proxy refused %q and %q: %w", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), syscall.ECONNRESET)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, nil))
			tr := New(roundTripperFunc(tc.base), WithClock(newClock()), WithBackoff(noJitter), WithSlog(log))
			if resp, _ := tr.RoundTrip(secRequest(t, context.Background())); resp != nil {
				resp.Body.Close()
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			require.Len(t, lines, 3, "two retries and a give-up")
			for i, l := range lines {
				secCheck(t, fmt.Sprintf("slog record %d", i+1), l)
				assert.Contains(t, l, `"url":"`+secSafeURL+`"`, "slog record %d", i+1)
			}
		})
	}
}

// TestWithSlogLastWins: of WithLogger and WithSlog the last given wins, and
// nil, for either, is no logging at all.
func TestWithSlogLastWins(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          func(z *zap.Logger, s *slog.Logger) []Option
		wantZ, wantSl int
	}{
		{"WithLogger then WithSlog", func(z *zap.Logger, s *slog.Logger) []Option { return []Option{WithLogger(z), WithSlog(s)} }, 0, 1},
		{"WithSlog then WithLogger", func(z *zap.Logger, s *slog.Logger) []Option { return []Option{WithSlog(s), WithLogger(z)} }, 1, 0},
		{"WithSlog(nil) after WithLogger", func(z *zap.Logger, _ *slog.Logger) []Option { return []Option{WithLogger(z), WithSlog(nil)} }, 0, 0},
		{"WithLogger(nil) after WithSlog", func(_ *zap.Logger, s *slog.Logger) []Option { return []Option{WithSlog(s), WithLogger(nil)} }, 0, 0},
		{"a zero slog.Logger", func(*zap.Logger, *slog.Logger) []Option { return []Option{WithSlog(&slog.Logger{})} }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zl, logs := logSink()
			rec := newSlogRecorder(slog.LevelDebug)
			logCall(replies{reply(503), reply(200)}, false)(t, tc.opts(zl, slog.New(rec))...)
			assert.Equal(t, tc.wantZ, logs.Len(), "zap entries")
			assert.Len(t, rec.entries(), tc.wantSl, "slog records")
		})
	}
}

// TestWithSlogKeepsLoggerAttrs: the entries come after the Logger's own
// attributes, inside its groups, as any record of that Logger would.
func TestWithSlogKeepsLoggerAttrs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil)).With("app", "chat").WithGroup("retryhttp")
	logCall(replies{reply(503), reply(200)}, false)(t, WithSlog(log))
	assert.Contains(t, buf.String(), `"msg":"llm transient failure — retrying","app":"chat","retryhttp":{"attempt":1,"max":2,"status":503,`)
}

// TestWithSlogDisabledLevel: a Handler that does not enable Warn is asked,
// and then nothing is built: no record, and no allocation more than with no
// logger at all (the Nop default).
func TestWithSlogDisabledLevel(t *testing.T) {
	rec := newSlogRecorder(slog.LevelError)
	logCall(replies{reply(503), reply(200)}, false)(t, WithSlog(slog.New(rec)))
	assert.Empty(t, rec.entries())
	assert.Positive(t, rec.enabledCalls(), "the Handler says what is enabled")
	// Its allocations: TestWithSlogDisabledLevelAllocates (cost_test.go).
}

// TestSlogCore: the core under WithSlog keeps fields of every kind, zap's
// With included, and spaces zap's levels as slog's.
func TestSlogCore(t *testing.T) {
	rec := newSlogRecorder(slog.LevelDebug)
	l := zap.New(slogCore{h: rec}).With(zap.String("component", "llm"))
	l.Warn("m", zap.Int("n", 1), zap.Bool("b", true), zap.Duration("d", time.Second),
		zap.Float64("f", 0.5), zap.Uint("u", 3), zap.Skip(), zap.Int32("i32", -2))
	got := slogLines(rec)
	require.Len(t, got, 1)
	assert.Equal(t, []logKV{{"component", "llm"}, {"n", int64(1)}, {"b", true}, {"d", time.Second},
		{"f", 0.5}, {"u", uint64(3)}, {"i32", int64(-2)}}, got[0].Fields)

	for zl, want := range map[zapcore.Level]slog.Level{
		zapcore.DebugLevel: slog.LevelDebug, zapcore.InfoLevel: slog.LevelInfo,
		zapcore.WarnLevel: slog.LevelWarn, zapcore.ErrorLevel: slog.LevelError,
	} {
		assert.Equal(t, want, slogLevel(zl), "zap's %v", zl)
	}
	assert.Greater(t, slogLevel(zapcore.DPanicLevel), slog.LevelError)
	assert.False(t, slogCore{h: newSlogRecorder(slog.LevelError)}.Enabled(zapcore.WarnLevel))
	assert.NoError(t, slogCore{h: rec}.Sync())
}
