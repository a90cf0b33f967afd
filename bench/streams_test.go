package bench

// A short run of the streams scenario (issue 38), so that CI exercises every
// row, the SDKs' included: 200 calls of 32 workers, answers of 10 tokens
// that take 15 ms, retryhttp's backoff from 5 ms. It checks only what holds whatever the timing, by a wide
// margin: cmd/streams measures the targets, never asserted here.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var shortStreams = StreamsConfig{Workers: 32, Calls: 200, TTFT: 5 * time.Millisecond, TokenEvery: time.Millisecond,
	Tokens: 10, Stall: 500 * time.Millisecond, FirstToken: 100 * time.Millisecond, Backoff: 5 * time.Millisecond, Timeout: 10 * time.Second, Seed: 38}

func TestStreams(t *testing.T) {
	for _, d := range []StreamDialect{StreamAnthropic, StreamOpenAI} {
		rows := StreamsRows(d)
		byName := map[string]StreamsRow{}
		for _, r := range rows {
			byName[r.Name] = r
		}
		t.Run(d.String()+"/none", func(t *testing.T) {
			cfg := shortStreams
			cfg.Dialect = d
			for _, row := range rows {
				r := Streams(row, cfg)
				assert.Equal(t, cfg.Calls, r.Completed, "%s: every call completes (%s)", row.Name, r.FirstErr)
				assert.Equal(t, int64(cfg.Calls), r.Requests, "%s: one request a call", row.Name)
				assert.Len(t, r.TTFTs, cfg.Calls, row.Name)
			}
		})
		t.Run(d.String()+"/overloaded", func(t *testing.T) {
			cfg := shortStreams
			cfg.Dialect, cfg.Fault, cfg.Share = d, FaultOverloaded, 0.3
			for _, row := range rows {
				r := Streams(row, cfg)
				assert.Positive(t, r.Failed[FaultOverloaded], row.Name)
				switch row.Name {
				case "retryhttp + WithStreamRetry":
					assert.GreaterOrEqual(t, r.Share(), 0.9, "%s (expected 0.973)", row.Name)
					assert.LessOrEqual(t, r.PerCompleted(), 1.6, row.Name)
				case "retryhttp WithMaxRetries(4) + WithStreamRetry":
					assert.GreaterOrEqual(t, r.Share(), 0.95, "%s (expected 0.998)", row.Name)
				default: // nothing retries a 200 whose stream then fails
					assert.LessOrEqual(t, r.Share(), 0.85, "%s (expected 0.70)", row.Name)
					assert.Equal(t, int64(cfg.Calls), r.Requests, row.Name)
				}
			}
		})
		t.Run(d.String()+"/stall", func(t *testing.T) {
			cfg := shortStreams
			cfg.Dialect, cfg.Fault, cfg.Share = d, FaultStall, 0.1
			with := Streams(byName["retryhttp + WithStreamRetry"], cfg)
			assert.GreaterOrEqual(t, with.Share(), 0.97)
			assert.Less(t, with.TTFT(0.95), cfg.Stall, "stalls cut at FirstToken and retried")
			assert.LessOrEqual(t, with.PerCompleted(), 1.3)
			without := Streams(byName["retryhttp (no WithStreamRetry)"], cfg)
			assert.Equal(t, cfg.Calls, without.Completed, "a stall ends, late")
			assert.GreaterOrEqual(t, without.TTFT(0.99), cfg.Stall, "waited out")
		})
	}
}

func TestStreamsTargetsMissed(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := StreamsReport{Calls: 100, Completed: 96, Requests: 150, TTFTs: []time.Duration{ms(202), ms(3500)}}
	bare := StreamsReport{TTFTs: []time.Duration{ms(200), ms(3600)}}
	assert.Equal(t, 0.96, r.Share())
	assert.InDelta(t, 1.5625, r.PerCompleted(), 1e-9)
	assert.Equal(t, []string{"completed", "p99", "over bare", "requests"},
		StreamsTargets{Share: 0.97, P99: ms(3000), OverBare: ms(1), PerCompleted: 1.5}.Missed(r, bare))
	assert.Empty(t, StreamsTargets{Share: 0.96, P99: ms(3500), OverBare: ms(2), PerCompleted: 1.6}.Missed(r, bare))
	assert.Empty(t, StreamsTargets{}.Missed(StreamsReport{}, bare))
}
