package retryhttp

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WithSlog sets a log/slog Logger to get the transport's entries, for a
// program that does not log with zap: the same Warn entries as WithLogger's,
// with the same messages and fields (R14, R17), each field an attribute of
// the same name and kind (int64 for attempt, max, status, tries, wait_ms and
// waited_ms; strings for the rest), after l's own attributes and inside its
// groups. No entry has a source, as none has a caller under WithLogger. A
// level l's Handler does not enable costs one Enabled call per entry, and
// nothing is built.
//
// Of WithLogger and WithSlog, the last given wins. nil, like WithLogger(nil),
// means no logging (zap.NewNop(), the default); so does a zero slog.Logger,
// which has no Handler.
//
// The Handler is called with context.Background(), not the request's
// context: the entries are made where zap's are, and zap carries no context.
func WithSlog(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil || l.Handler() == nil {
			c.logger = zap.NewNop()
			return
		}
		// One logging path (observe.go) for both: a zap.Logger over a
		// core that hands each entry to l's Handler, made once, in New.
		// zap.New adds no caller and no stack trace (R14).
		c.logger = zap.New(slogCore{h: l.Handler()})
	}
}

// slogCore is a zapcore.Core that writes each entry to a slog.Handler. The
// Handler says which levels are enabled: a disabled one stops at Enabled,
// before zap builds an entry.
type slogCore struct{ h slog.Handler }

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{h: c.h.WithAttrs(attrsOf(fields))}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	// pc 0: no source, as the zap entries have no caller (R14).
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	for _, f := range fields {
		if a, ok := attrOf(f); ok {
			r.AddAttrs(a)
		}
	}
	return c.h.Handle(context.Background(), r)
}

func (slogCore) Sync() error { return nil }

// slogLevel is zap's level as slog spaces them: zap's Debug, Info, Warn and
// Error are -1, 0, 1 and 2, slog's -4, 0, 4 and 8. zap's DPanic, Panic and
// Fatal land above slog's Error, as they are above zap's.
func slogLevel(l zapcore.Level) slog.Level {
	return slog.Level(l) * 4
}

func attrsOf(fields []zapcore.Field) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		if a, ok := attrOf(f); ok {
			attrs = append(attrs, a)
		}
	}
	return attrs
}

// attrOf is f as a slog attribute of the same name and kind. zap.Int and
// zap.String, every field the transport writes, are read directly; any
// other field as zap's own encoders read it, so that a field added later is
// not dropped. A field that writes nothing (zap.Skip) gives no attribute.
func attrOf(f zapcore.Field) (slog.Attr, bool) {
	switch f.Type {
	case zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type:
		return slog.Int64(f.Key, f.Integer), true
	case zapcore.StringType:
		return slog.String(f.Key, f.String), true
	case zapcore.SkipType:
		return slog.Attr{}, false
	}
	enc := zapcore.NewMapObjectEncoder()
	f.AddTo(enc)
	v, ok := enc.Fields[f.Key]
	return slog.Any(f.Key, v), ok
}
