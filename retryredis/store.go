package retryredis

import (
	"context"
	"crypto/rand"
	_ "embed" // the scripts
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"go.uber.org/zap"
)

// The scripts, each in its own file, commented line by line.
var (
	//go:embed apply.lua
	applySrc    string
	applyScript = redis.NewScript(applySrc)
	//go:embed index.lua
	indexSrc    string
	indexScript = redis.NewScript(indexSrc)
)

const (
	// keyMargin is how long a key's state outlives the latest of its holds
	// and schedules (its TTL): a key quiet that long goes, and a Cooldown
	// arming it again starts from nothing, as the in-process Store does.
	keyMargin = time.Minute
	// indexWindow is how long an armed key stays in the index; indexMax
	// bounds it. A process polls it every pollEvery: one missed message
	// is heard within that (R24: within a second in any case).
	indexWindow = 10 * time.Second
	indexMax    = 1000
	pollEvery   = 500 * time.Millisecond
)

var errOpen = errors.New("retryredis: Redis skipped after repeated failures (breaker open)")

// A Store keeps retryhttp Cooldowns' state on Redis (R24), so that K
// replicas of a backend sharing one provider account pace together at
// the provider's rate: give each replica's Cooldown
// retryhttp.WithStore(retryredis.NewStore(rdb)).
//
// Each Apply is one round trip (apply.lua runs the ops on the key's state
// atomically, on Redis's clock); one that holds or limits a lane also
// publishes the key's state to every other Store on the prefix and puts it
// in an index that they poll, in the same round trip. An Apply that fails
// or does not answer within the bound (WithTimeout) returns an error, and
// the Cooldown goes on with its own state; after repeated failures the
// breaker skips Redis for a while (WithBreaker). Junk at a key is read as
// nothing and overwritten.
//
// Give it a client with ContextTimeoutEnabled set (redis.Options): the
// bound then reaches the socket. With another client, each operation runs
// in a goroutine of its own that the bound stops waiting for (it ends
// when the client's own timeouts end it).
//
// A Store is safe for concurrent use by multiple goroutines. Close stops
// what Listen started; it does not close rdb.
type Store struct {
	rdb       redis.UniversalClient
	cfg       config
	id        string // this Store's, in front of what it publishes
	keyPrefix string // prefix + "key:"
	index     string // prefix + "armed": the sorted set of keys armed lately
	channel   string // prefix + "armed": the pub/sub channel
	direct    bool   // rdb bounds its I/O by the context
	br        breaker

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines Listen started, and ops out (not direct)
	kick   chan struct{}  // polls at once (after a resubscription)

	mu        sync.Mutex
	listeners map[int]func(string, retryhttp.StoreState)
	nextID    int
	started   bool
	closed    bool
	seen      map[string]int64  // index entries heard of: Redis key → score
	delivered map[string]uint64 // the Seq last delivered of each Redis key
}

// NewStore returns a Store on rdb (a *redis.Client, *redis.ClusterClient,
// *redis.Ring, or any UniversalClient): every script touches one key, so
// Redis Cluster works. It panics when rdb is nil. Nil options are ignored.
func NewStore(rdb redis.UniversalClient, opts ...Option) *Store {
	if rdb == nil {
		panic("retryredis: NewStore: nil client")
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Store{rdb: rdb, cfg: cfg, id: hex.EncodeToString(id[:]),
		keyPrefix: cfg.prefix + "key:", index: cfg.prefix + "armed", channel: cfg.prefix + "armed",
		direct: boundsByContext(rdb), kick: make(chan struct{}, 1),
		listeners: make(map[int]func(string, retryhttp.StoreState)), seen: make(map[string]int64),
		delivered: make(map[string]uint64)}
	s.br.failures, s.br.coolOff = int32(cfg.failures), cfg.coolOff
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// boundsByContext reports whether rdb ends its reads and writes at the
// context's deadline (ContextTimeoutEnabled).
func boundsByContext(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Apply applies ops to key's state on Redis, atomically, at Redis's now,
// and returns the state after them (retryhttp.Store). It answers within
// the bound: an error (Redis failing, slow, skipped by the breaker, or ctx
// ending) means the Cooldown goes on with its own state for that call. A
// timeout cannot tell whether the script ran: its ops may have taken
// effect on Redis all the same.
func (s *Store) Apply(ctx context.Context, key string, ops []retryhttp.StoreOp) (retryhttp.StoreState, error) {
	ok, probe := s.br.allow(time.Now())
	if !ok {
		return retryhttp.StoreState{}, errOpen
	}
	args, arms := appendOps(make([]byte, 0, 64+48*len(ops)), ops)
	rkey := s.keyPrefix + key
	reply, score, err := s.exec(ctx, rkey, args, arms)
	var st retryhttp.StoreState
	if err == nil {
		st, err = parseReply(reply)
	}
	s.settle(ctx, probe, err)
	if err != nil {
		return retryhttp.StoreState{}, fmt.Errorf("retryredis: apply: %w", err)
	}
	if score > 0 {
		s.mu.Lock()
		s.seen[rkey] = score // our own arming: the poll does not hear it back
		s.mu.Unlock()
	}
	return st, nil
}

// settle tells the breaker how an operation ended, and logs what that
// changed, once.
func (s *Store) settle(ctx context.Context, probe bool, err error) {
	o := succeeded
	if err != nil {
		o = failed
		if ctx.Err() != nil {
			o = abandoned
		}
	}
	tr, down := s.br.done(time.Now(), probe, o)
	switch tr {
	case opened:
		s.cfg.logger.Warn("retryredis: Redis is failing; each process paces on its own until it is back",
			zap.Error(err), zap.Int("failures", int(s.br.failures)), zap.Int64("retry_in_ms", s.cfg.coolOff.Milliseconds()))
	case closed:
		s.cfg.logger.Warn("retryredis: Redis is back; the processes pace together again",
			zap.Int64("down_ms", down.Milliseconds()))
	}
}

// exec runs apply.lua on rkey with args within the bound, and index.lua
// too when arms: one round trip. It returns the reply, and the index's
// score when it indexed the key.
func (s *Store) exec(ctx context.Context, rkey string, args []byte, arms bool) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if s.direct {
		return s.call(ctx, rkey, args, arms)
	}
	type result struct {
		reply string
		score int64
		err   error
	}
	ch := make(chan result, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		r, sc, err := s.call(ctx, rkey, args, arms)
		ch <- result{r, sc, err}
	}()
	select {
	case r := <-ch:
		return r.reply, r.score, r.err
	case <-ctx.Done():
		return "", 0, ctx.Err()
	}
}

// call is exec's round trip: EVALSHA, and EVAL when Redis has not the
// script (NOSCRIPT: restarted, or SCRIPT FLUSH).
func (s *Store) call(ctx context.Context, rkey string, args []byte, arms bool) (string, int64, error) {
	keys := []string{rkey}
	argv := []any{s.id, s.channel, keyMargin.Milliseconds(), args}
	if !arms {
		reply, err := applyScript.Run(ctx, s.rdb, keys, argv...).Text()
		return reply, 0, err
	}
	ixKeys, ixArgv := []string{s.index}, []any{rkey, indexWindow.Milliseconds(), indexMax}
	pipe := s.rdb.Pipeline()
	a := pipe.EvalSha(ctx, applyScript.Hash(), keys, argv...)
	ix := pipe.EvalSha(ctx, indexScript.Hash(), ixKeys, ixArgv...)
	_, _ = pipe.Exec(ctx)
	if redis.HasErrorPrefix(a.Err(), "NOSCRIPT") {
		a = s.rdb.Eval(ctx, applySrc, keys, argv...)
	}
	if redis.HasErrorPrefix(ix.Err(), "NOSCRIPT") {
		ix = s.rdb.Eval(ctx, indexSrc, ixKeys, ixArgv...)
	}
	reply, err := a.Text()
	if err != nil {
		return "", 0, err
	}
	sc, _ := ix.Text() // the index is a hint: its failure is no error
	score, _ := strconv.ParseInt(sc, 10, 64)
	return reply, score, nil
}

// Close stops the subscription and the poll that Listen started, and
// waits for them and for the operations still out. It does not close the
// client. A Store closed still applies ops; Listen then does nothing.
// Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	clear(s.listeners)
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
