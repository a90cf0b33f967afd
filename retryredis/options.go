package retryredis

import (
	"context"
	"log/slog"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// An Option configures a Store in NewStore.
type Option func(*config)

type config struct {
	prefix   string
	timeout  time.Duration
	log      logger
	failures int
	coolOff  time.Duration
}

// The defaults, and why.
const (
	// DefaultTimeout bounds each operation. A Redis beside the backends
	// answers in well under a millisecond, and its slow tail (a fork for a
	// snapshot, a GC pause here) in a few; 30 ms leaves room for that and
	// for a Redis in another zone, and stays far below what an LLM call
	// takes, so that a Redis that stops answering costs a call at most a
	// wait it does not notice before it goes on with its own state.
	DefaultTimeout = 30 * time.Millisecond
	// DefaultFailures is how many operations in a row must fail before the
	// breaker skips Redis: one timeout is a blip, three are an outage.
	DefaultFailures = 3
	// DefaultCoolOff is how long the breaker skips Redis before one
	// operation tries it again. Under a second, so that the fleet is back
	// on Redis within a second of Redis coming back (R24).
	DefaultCoolOff = 500 * time.Millisecond
)

func defaultConfig() config {
	return config{prefix: "retryhttp:", timeout: DefaultTimeout,
		failures: DefaultFailures, coolOff: DefaultCoolOff}
}

// WithPrefix makes every Redis key the Store uses start with p: a key's
// state is p+"key:"+key, the index of keys armed lately p+"armed", and the
// pub/sub channel p+"armed" too. The default is "retryhttp:"; "" is no
// prefix at all. Stores share state only when their prefixes are equal:
// give each fleet (each provider account) its own. A prefix may not hold
// "key:" (its keys would meet another prefix's: NewStore panics).
func WithPrefix(p string) Option {
	return func(c *config) { c.prefix = p }
}

// WithTimeout bounds each operation on Redis (an Apply, and each poll of
// the index) to d: one that has not answered by then fails, and the
// Cooldown goes on, for that call, with what its process knows. The
// default, and zero or negative, is DefaultTimeout (30 ms).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithLogger sets where the Store says that Redis is failing (a Warn
// entry) and that it is back (an Info entry, as a Cooldown says its Store
// works again), once each time it changes, never a secret (no key's
// contents, no password). The default, and nil, is no logging. WithSlog
// does the same for a log/slog Logger; of the two, the last given wins.
// go-redis logs on its own (its pool's dial failures, at every attempt):
// route it to the same logger, structured and sampled, with
// redis.SetLogger(RedisLogger(l)) or RedisSlog (see RedisLog).
func WithLogger(l *zap.Logger) Option {
	return func(c *config) { c.log = logger{z: l} }
}

// WithSlog is WithLogger for a log/slog Logger: the same entries, at
// slog.LevelWarn and slog.LevelInfo, with the same attributes. nil is no
// logging.
func WithSlog(l *slog.Logger) Option {
	return func(c *config) { c.log = logger{s: l} }
}

// logger is the Store's zap or slog Logger, or none.
type logger struct {
	z *zap.Logger
	s *slog.Logger
}

// warn writes a Warn entry with the attributes kv: pairs of a key and an
// int64, a string or an error (written as its text).
func (l logger) warn(msg string, kv ...any) {
	l.log(context.Background(), zapcore.WarnLevel, msg, kv...)
}

// info is warn at the Info level.
func (l logger) info(msg string, kv ...any) {
	l.log(context.Background(), zapcore.InfoLevel, msg, kv...)
}

// warnContext is warn with the context a slog Handler is given.
func (l logger) warnContext(ctx context.Context, msg string, kv ...any) {
	l.log(ctx, zapcore.WarnLevel, msg, kv...)
}

// log writes an entry at level, Info or Warn (slog.LevelInfo or
// slog.LevelWarn for a slog Logger).
func (l logger) log(ctx context.Context, level zapcore.Level, msg string, kv ...any) {
	switch {
	case l.z != nil:
		fields := make([]zap.Field, 0, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			fields = append(fields, zap.Any(kv[i].(string), text(kv[i+1])))
		}
		l.z.Log(level, msg, fields...)
	case l.s != nil:
		attrs := make([]any, 0, len(kv))
		for i := 0; i+1 < len(kv); i += 2 {
			attrs = append(attrs, kv[i], text(kv[i+1]))
		}
		sl := slog.LevelWarn
		if level == zapcore.InfoLevel {
			sl = slog.LevelInfo
		}
		l.s.Log(ctx, sl, msg, attrs...)
	}
}

// text is v, or an error's text.
func text(v any) any {
	if err, ok := v.(error); ok {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	return v
}

// WithBreaker sets the breaker: after failures operations in a row have
// failed, the Store skips Redis (an Apply fails at once) for coolOff, then
// lets one operation try it; its success closes the breaker, its failure
// opens it for coolOff again. Zero or negative values leave the default of
// each: DefaultFailures (3) and DefaultCoolOff (500 ms).
func WithBreaker(failures int, coolOff time.Duration) Option {
	return func(c *config) {
		if failures > 0 {
			c.failures = failures
		}
		if coolOff > 0 {
			c.coolOff = coolOff
		}
	}
}
