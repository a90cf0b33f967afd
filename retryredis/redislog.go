package retryredis

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// A RedisLog is go-redis's own logger routed to a service's logger: give it
// to redis.SetLogger (it has the Printf that go-redis's logger interface
// asks for). go-redis logs apart from any Store, for the whole process, on
// stderr by default and unstructured: with Redis down its pool writes a
// line at every failed dial ("redis: connection pool: failed to dial after
// 5 attempts: ..."), from every client, many a second.
//
// A RedisLog writes each line as one Warn entry, its message the line's
// text, with the attributes logger ("go-redis") and format (go-redis's
// format string: the same for every line of one kind, to count and alert
// on). Lines that repeat are sampled: at most one entry a second per
// format, the first of a second at once, the next written after it with
// count, how many lines it stands for (itself and those left out since
// the one before). A line whose format is only verbs ("%s") is sampled by
// its text, with its numbers left out (a connection's id). Past 256 kinds
// written within one second, the kinds it does not remember share one
// sample: an entry a second, whose count stands for the lines of them
// all. No line goes uncounted.
//
// To quiet go-redis instead, give redis.SetLogger a RedisLog of a nil
// logger, which writes nothing. A RedisLog is safe for concurrent use.
type RedisLog struct {
	log logger
	now func() time.Time // time.Now; a test's clock

	mu    sync.Mutex
	last  map[string]*list.Element // of *redisSeen
	order list.List                // of *redisSeen, the one written longest ago first
	spill *redisSeen               // the kinds not remembered
}

// redisSeen is what a RedisLog remembers of a kind of line.
type redisSeen struct {
	kind string
	at   time.Time // when the last entry of it was written
	held int       // lines of it not written since
}

// redisSampleEvery is how often a kind of line that repeats is written;
// redisMaxKinds bounds the kinds remembered. Past it, a kind is forgotten
// only once its second has passed (the one written longest ago first),
// and the count it held goes to the next entry of a kind that takes its
// room; while every kind remembered was written within the second, the
// kinds not remembered share one sample (spill).
const (
	redisSampleEvery = time.Second
	redisMaxKinds    = 256
)

// RedisLogger returns the RedisLog that writes go-redis's lines to l, a
// zap Logger (named "go-redis" under l's name, with no caller: the caller
// would be this file). nil writes nothing.
func RedisLogger(l *zap.Logger) *RedisLog {
	if l != nil {
		l = l.Named("go-redis").WithOptions(zap.WithCaller(false))
	}
	return &RedisLog{log: logger{z: l}, now: time.Now}
}

// RedisSlog is RedisLogger for a log/slog Logger: the same entries, at
// slog.LevelWarn, each with the attribute logger="go-redis", handed
// go-redis's context. nil, or a Logger with no Handler, writes nothing.
func RedisSlog(l *slog.Logger) *RedisLog {
	if l != nil && l.Handler() == nil {
		l = nil
	}
	return &RedisLog{log: logger{s: l}, now: time.Now}
}

// Printf writes one line of go-redis's (its format and arguments, as
// fmt.Sprintf takes them), unless the sampling leaves it out.
func (r *RedisLog) Printf(ctx context.Context, format string, v ...any) {
	if r == nil || r.log.z == nil && r.log.s == nil {
		return
	}
	text := strings.TrimSpace(fmt.Sprintf(format, v...))
	n, ok := r.take(redisKind(format, text))
	if !ok {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	kv := []any{"format", format}
	if n > 1 {
		kv = append(kv, "count", int64(n))
	}
	if r.log.s != nil {
		kv = append([]any{"logger", "go-redis"}, kv...)
	}
	r.log.warnContext(ctx, text, kv...)
}

// take reports whether a line of kind may be written now, and how many
// lines it stands for (itself included).
func (r *RedisLog) take(kind string) (n int, ok bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if el := r.last[kind]; el != nil {
		if n, ok = el.Value.(*redisSeen).take(now); ok {
			r.order.MoveToBack(el)
		}
		return n, ok
	}
	if r.last == nil {
		// as if written a second ago: the first line past the bound is
		// written at once
		r.last, r.spill = make(map[string]*list.Element), &redisSeen{at: now.Add(-redisSampleEvery)}
	}
	if !r.makeRoom(now) {
		return r.spill.take(now)
	}
	r.last[kind] = r.order.PushBack(&redisSeen{kind: kind, at: now})
	n, r.spill.held = 1+r.spill.held, 0 // and it carries what the kinds forgotten held
	return n, true
}

// makeRoom makes room for a kind not remembered: when the memory is full,
// it forgets the kind written longest ago if its second has passed, and
// moves its held count to the spill. false: no room.
func (r *RedisLog) makeRoom(now time.Time) bool {
	if len(r.last) < redisMaxKinds {
		return true
	}
	front := r.order.Front()
	old := front.Value.(*redisSeen)
	if now.Sub(old.at) < redisSampleEvery {
		return false
	}
	r.order.Remove(front)
	delete(r.last, old.kind)
	r.spill.held += old.held
	return true
}

// take is one line of e's at now: whether it is written, and how many
// lines it stands for.
func (e *redisSeen) take(now time.Time) (n int, ok bool) {
	if now.Sub(e.at) < redisSampleEvery {
		e.held++
		return 0, false
	}
	n = e.held + 1
	e.at, e.held = now, 0
	return n, true
}

// redisKind is what a line is sampled by: its format, unless the format
// has no words of its own (go-redis's maintenance notifications format
// every line as "%s"); then its text, each run of digits as one '#', cut
// to 80 bytes.
func redisKind(format, text string) string {
	if hasWords(format) {
		return format
	}
	var b strings.Builder
	digits := false
	for i := 0; i < len(text) && b.Len() < 80; i++ {
		c := text[i]
		isDigit := c >= '0' && c <= '9'
		switch {
		case isDigit && !digits:
			b.WriteByte('#')
		case !isDigit:
			b.WriteByte(c)
		}
		digits = isDigit
	}
	return "text:" + b.String()
}

// hasWords reports whether format has a letter outside its verbs.
func hasWords(format string) bool {
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '%' {
			// Skip the flags, width and precision up to the verb's letter
			// (or a second '%').
			for i++; i < len(format) && !isLetter(format[i]) && format[i] != '%'; i++ {
			}
			continue
		}
		if isLetter(c) {
			return true
		}
	}
	return false
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
