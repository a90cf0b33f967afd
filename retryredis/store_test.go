package retryredis

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestPingSaysWhy: Ping's error names the cause: a Redis that refuses the
// connection (nothing listens on the port) is "connection refused", not
// the deadline go-redis's retries ran into; one that accepts and never
// answers is the deadline. With a client bounded by the context and with
// one that is not.
func TestPingSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	silent := silentListener(t)
	for _, tc := range []struct {
		name, addr string
		want       error
	}{
		{"a closed port", closed, syscall.ECONNREFUSED},
		{"a listener that never answers", silent, context.DeadlineExceeded},
	} {
		for _, direct := range []bool{true, false} {
			c := redis.NewClient(&redis.Options{Addr: tc.addr, ContextTimeoutEnabled: direct,
				ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
			s := newStore(t, c)
			start := time.Now()
			err := s.Ping(context.Background())
			took := time.Since(start)
			_ = c.Close()
			require.Error(t, err, "%s, bounded by the context %v", tc.name, direct)
			assert.ErrorIs(t, err, tc.want, "%s, bounded by the context %v: %v", tc.name, direct, err)
			assert.Less(t, took, 2*DefaultTimeout+slack, "%s: within twice the bound", tc.name)
			if tc.want != context.DeadlineExceeded {
				assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s: %v", tc.name, err)
			}
		}
	}
}

// silentListener is the address of a listener on 127.0.0.1 that accepts
// connections and never answers; they close when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

// TestBreakerLogLevels: Redis failing is a Warn entry, Redis back an
// Info one, as the Cooldown's own Store failing and working again are;
// to zap and to slog alike.
func TestBreakerLogLevels(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lines, sl := newSlogLines()
	for _, opt := range []Option{WithLogger(zap.New(core)), WithSlog(sl)} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		s := newStore(t, c, opt, WithBreaker(1, time.Millisecond))
		s.noteOutcome(context.Background(), false, errors.New("refused"))
		require.True(t, s.br.isOpen())
		s.noteOutcome(context.Background(), true, nil)
		require.False(t, s.br.isOpen())
		_ = c.Close()
	}
	levels := map[string]zapcore.Level{}
	for _, e := range logs.All() {
		levels[e.Message] = e.Level
	}
	assert.Equal(t, map[string]zapcore.Level{msgFailing: zapcore.WarnLevel, msgBack: zapcore.InfoLevel}, levels, "zap")
	slevels := map[string]any{}
	for _, e := range lines.entries(t) {
		slevels[e["msg"].(string)] = e["level"]
	}
	assert.Equal(t, map[string]any{msgFailing: slog.LevelWarn.String(), msgBack: slog.LevelInfo.String()}, slevels, "slog")
}
