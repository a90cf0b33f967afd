package retryredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Junk at a key is read as nothing and overwritten, never an error loop
// and never a panic (R24); every key has a TTL; Seq grows past a key lost.
// (The kit's junk checks, kit_test.go, plant bytes; these plant Redis's
// other types too.)

// tol is what elapses between a test's Applies, for the times it reads.
const tol = 5 * time.Millisecond

// binaryRates is 53 bytes, as the policy's rates are, with every byte the
// script's formats could trip on.
var binaryRates = func() string {
	b := make([]byte, 53)
	for i := range b {
		b[i] = byte(i * 5)
	}
	b[3], b[4], b[5], b[6] = ' ', ':', '\n', 0
	return string(b)
}()

func TestJunkAtTheKey(t *testing.T) {
	srv := sharedRedis(t)
	c := srv.client(t)
	prefix := testPrefix(t)
	s := newStore(t, c, WithPrefix(prefix), WithTimeout(2*time.Second))
	ctx := context.Background()
	valid := func() string {
		st, err := s.Apply(ctx, "valid", []store.Op{{Kind: store.OpHold, For: time.Second}})
		require.NoError(t, err)
		require.NotZero(t, st.Seq)
		v, err := c.Get(ctx, prefix+"key:valid").Result()
		require.NoError(t, err)
		return v
	}()
	cases := []struct {
		name string
		put  func(k string) error
	}{
		{"a string", func(k string) error { return c.Set(ctx, k, "garbage", 0).Err() }},
		{"an empty string", func(k string) error { return c.Set(ctx, k, "", 0).Err() }},
		{"a list", func(k string) error { return c.RPush(ctx, k, "a", "b").Err() }},
		{"a hash with garbage fields", func(k string) error { return c.HSet(ctx, k, "seq", "x", "lanes", "\x00\xff").Err() }},
		{"a set", func(k string) error { return c.SAdd(ctx, k, "a").Err() }},
		{"a record cut short", func(k string) error { return c.Set(ctx, k, valid[:len(valid)/2], 0).Err() }},
		{"a record with a NaN", func(k string) error { return c.Set(ctx, k, strings.Replace(valid, " 0 ", " nan ", 1), 0).Err() }},
		{"a record with an inf", func(k string) error { return c.Set(ctx, k, strings.Replace(valid, " 0 ", " inf ", 1), 0).Err() }},
		{"a record with a negative rate", func(k string) error {
			f := strings.Fields(valid)
			f[10] = "-5" // lane 0's Per
			return c.Set(ctx, k, strings.Join(f, " "), 0).Err()
		}},
		{"a record whose rates are cut short", func(k string) error { return c.Set(ctx, k, strings.Replace(valid, " 0:", " 99:", 1), 0).Err() }},
		{"a record of another version", func(k string) error { return c.Set(ctx, k, "r9"+valid[2:], 0).Err() }},
		{"huge numbers", func(k string) error { return c.Set(ctx, k, strings.ReplaceAll(valid, " 0 ", " 1e300 "), 0).Err() }},
		{"a fraction of a µs", func(k string) error { return c.Set(ctx, k, strings.Replace(valid, " 0 ", " 0.5 ", 1), 0).Err() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.name
			require.NoError(t, tc.put(prefix+"key:"+key))
			read, err := s.Apply(ctx, key, nil)
			require.NoError(t, err, "a read of junk is a read of nothing")
			assert.Zero(t, read.Seq)
			for i := range 2 {
				st, err := s.Apply(ctx, key, []store.Op{{Kind: store.OpHold, For: time.Second}, {Kind: store.OpTake, Costs: []float64{1}, Within: 2 * time.Second}})
				require.NoError(t, err, "apply %d", i)
				assert.True(t, st.Took)
				assert.InDelta(t, float64(time.Second), float64(st.Lane(0).Until.Sub(st.Now)), float64(tol))
			}
			typ, err := c.Type(ctx, prefix+"key:"+key).Result()
			require.NoError(t, err)
			assert.Equal(t, "string", typ, "overwritten")
			ttl, err := c.PTTL(ctx, prefix+"key:"+key).Result()
			require.NoError(t, err)
			assert.Greater(t, ttl, time.Minute)
		})
	}
}

func TestKeyTTL(t *testing.T) {
	srv := sharedRedis(t)
	c := srv.client(t)
	prefix := testPrefix(t)
	s := newStore(t, c, WithPrefix(prefix), WithTimeout(2*time.Second))
	ctx := context.Background()
	_, err := s.Apply(ctx, "read", nil)
	require.NoError(t, err)
	n, err := c.Exists(ctx, prefix+"key:read").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a read writes nothing")
	for _, tc := range []struct {
		name string
		ops  []store.Op
		want time.Duration
	}{
		{"a take", []store.Op{{Kind: store.OpTake, Costs: []float64{1}}}, store.KeepFor},
		{"a hold", []store.Op{{Kind: store.OpHold, Lane: 2, For: 5 * time.Second}}, store.KeepFor + 5*time.Second},
		{"a schedule", []store.Op{{Kind: store.OpRates, Per: float64(10 * time.Second)},
			{Kind: store.OpTake, Costs: []float64{1}}}, store.KeepFor + 10*time.Second},
		{"a hold of years is an hour's", []store.Op{{Kind: store.OpHold, For: 3 * 365 * 24 * time.Hour}}, store.KeepFor + store.MaxAhead},
		{"an open circuit", []store.Op{{Kind: store.OpFail, Solo: true, Failures: 1, Open: 20 * time.Second}}, store.KeepFor + 20*time.Second},
	} {
		_, err := s.Apply(ctx, tc.name, tc.ops)
		require.NoError(t, err)
		ttl, err := c.PTTL(ctx, prefix+"key:"+tc.name).Result()
		require.NoError(t, err)
		assert.InDelta(t, float64(tc.want), float64(ttl), float64(50*time.Millisecond), tc.name)
	}
	_, err = s.Apply(ctx, "armed", []store.Op{{Kind: store.OpLimited}})
	require.NoError(t, err)
	ttl, err := c.PTTL(ctx, prefix+"armed").Result()
	require.NoError(t, err)
	assert.InDelta(t, float64(2*indexWindow), float64(ttl), float64(50*time.Millisecond), "the index")
}

func TestSeqGrowsPastALostKey(t *testing.T) {
	srv := sharedRedis(t)
	c := srv.client(t)
	prefix := testPrefix(t)
	s := newStore(t, c, WithPrefix(prefix), WithTimeout(2*time.Second))
	ctx := context.Background()
	take := []store.Op{{Kind: store.OpTake, Costs: []float64{1}}}
	a, err := s.Apply(ctx, "k", take)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, a.Seq, uint64(a.Now.UnixMicro()), "Seq is at least Redis's clock in µs")
	require.NoError(t, c.Del(ctx, prefix+"key:k").Err())
	b, err := s.Apply(ctx, "k", take)
	require.NoError(t, err)
	assert.Greater(t, b.Seq, a.Seq, "a key lost and made again grows its Seq")
	for range 50 { // faster than Redis's clock moves a µs: still one more each
		c, err := s.Apply(ctx, "k", take)
		require.NoError(t, err)
		require.Greater(t, c.Seq, b.Seq)
		b = c
	}
}

func TestJunkAtTheIndexAndChannel(t *testing.T) {
	srv := sharedRedis(t)
	c := srv.client(t)
	prefix := testPrefix(t)
	ctx := context.Background()
	a := newStore(t, c, WithPrefix(prefix), WithTimeout(2*time.Second))
	b := newStore(t, c, WithPrefix(prefix), WithTimeout(2*time.Second))
	heard := make(chan string, 16)
	b.Listen(func(key string, _ store.State) { heard <- key })
	require.NoError(t, c.Set(ctx, prefix+"armed", "junk", 0).Err())
	for _, p := range []string{"", "x", "x 5:ab", "x 3:abc 1 2", "x 99999999999999999999:a", "x -1:a r1"} {
		require.NoError(t, c.Publish(ctx, prefix+"armed", p).Err())
	}
	_, err := a.Apply(ctx, "k", []store.Op{{Kind: store.OpHold, For: time.Second}})
	require.NoError(t, err)
	select {
	case k := <-heard:
		assert.Equal(t, "k", k)
	case <-time.After(2 * time.Second):
		t.Fatal("the hold was not heard")
	}
	typ, err := c.Type(ctx, prefix+"armed").Result()
	require.NoError(t, err)
	assert.Equal(t, "zset", typ, "the junk index is replaced")
}

func FuzzParseMessage(f *testing.F) {
	f.Add("abc 3:k:x 1 0 1 0 0 0 0 0 r3 5 1 0 0 0 0 0 0 0 0 0 0 0 0 0: 0 0 0 0 0 0 0")
	f.Add("a 1:k 1 2 3")
	f.Fuzz(func(t *testing.T, s string) {
		_, _, _, _ = parseMessage(s)
		_, _ = parseReply(s)
	})
}
