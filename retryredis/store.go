package retryredis

import (
	"context"
	"crypto/rand"
	_ "embed" // the scripts
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/store"
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
	wg     sync.WaitGroup // the goroutines Listen started, and ops out (not direct); added to under mu, before closed
	kick   chan struct{}  // polls at once (after a resubscription)
	// listening is closed when the subscription is first confirmed: Listen
	// waits for it (a state published as Listen returns is heard).
	listening chan struct{}

	mu        sync.Mutex
	listeners map[int]func(string, store.State)
	nextID    int
	started   bool
	closed    bool
	seen      map[string]int64  // index entries heard of: Redis key → score
	delivered map[string]uint64 // the Seq last delivered of each Redis key
}

// NewStore returns a Store on rdb: a *redis.Client (one Redis; a
// Sentinel-managed one through redis.NewFailoverClient is a *redis.Client
// too, not tested here: while it fails over, Applies fail and the
// Cooldowns pace on their own), or a *redis.ClusterClient (every script touches one key, and Redis Cluster
// broadcasts pub/sub to every node: TestCluster runs it on three masters).
// Nil options are ignored. A Redis down when NewStore is called is no
// error: every Apply fails, and the Cooldowns pace on their own states
// until it is up (Ping tells a readiness probe).
//
// NewStore panics, as it does for a nil client, on what cannot work and
// would otherwise fail in silence: a *redis.Ring, whose shards do not share
// pub/sub (a replica subscribed on one shard misses what the others
// publish on theirs); a prefix holding "key:" (WithPrefix); and a call
// inside a testing/synctest bubble, where a Store's network I/O never
// blocks durably, so that the bubble's time stands still and the test
// hangs until -timeout (give the Cooldowns of a fleet in a bubble one
// store.NewLocal instead: docs/testing.md).
func NewStore(rdb redis.UniversalClient, opts ...Option) *Store {
	if rdb == nil {
		panic("retryredis: NewStore: nil client")
	}
	if _, ok := rdb.(*redis.Ring); ok {
		panic("retryredis: NewStore: a *redis.Ring is not supported: its shards do not share pub/sub, so replicas miss each other's news; use a *redis.Client or a *redis.ClusterClient")
	}
	if inBubble() {
		panic("retryredis: NewStore inside a testing/synctest bubble: Redis I/O is not durably blocking, so the bubble's clock would stand still and the test hang; share one store.NewLocal among the fleet's Cooldowns instead")
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if strings.Contains(cfg.prefix, "key:") {
		panic(fmt.Sprintf("retryredis: WithPrefix(%q): a prefix may not hold \"key:\": its keys would meet another prefix's", cfg.prefix))
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Store{rdb: rdb, cfg: cfg, id: hex.EncodeToString(id[:]),
		keyPrefix: cfg.prefix + "key:", index: cfg.prefix + "armed", channel: cfg.prefix + "armed",
		direct: boundsByContext(rdb), kick: make(chan struct{}, 1), listening: make(chan struct{}),
		listeners: make(map[int]func(string, store.State)), seen: make(map[string]int64),
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

// Apply applies ops to key's Record on Redis, atomically, at Redis's now,
// and returns the State after them (store.Store). It answers within the
// bound: an error (Redis failing, slow, skipped by the breaker, or ctx
// ending) means the Cooldown goes on with its own state for that call. A
// timeout cannot tell whether the script ran: its ops may have taken
// effect on Redis all the same. An Apply whose Result has Publish set
// costs a second round trip, after the first: the index of keys armed
// lately, for the processes whose subscription missed the message.
func (s *Store) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	ok, probe := s.br.allow(time.Now())
	if !ok {
		return store.State{}, errOpen
	}
	args := appendOps(make([]byte, 0, 64+48*len(ops)), ops)
	rkey := s.keyPrefix + key
	reply, err := s.exec(ctx, func(ctx context.Context) (string, error) { return s.call(ctx, rkey, args) })
	var st store.State
	if err == nil {
		st, err = parseReply(reply)
	}
	s.noteOutcome(ctx, probe, err)
	if err != nil {
		return store.State{}, fmt.Errorf("retryredis: apply: %w", err)
	}
	if st.Publish {
		s.indexKey(ctx, rkey)
	}
	return st, nil
}

// indexKey scores rkey in the index of keys armed lately (index.lua):
// a hint for the poll, so its failure is no error.
func (s *Store) indexKey(ctx context.Context, rkey string) {
	sc, err := s.exec(ctx, func(ctx context.Context) (string, error) {
		return runScript(ctx, s.rdb, indexScript, indexSrc, []string{s.index}, rkey, indexWindow.Milliseconds(), indexMax)
	})
	if score, perr := strconv.ParseInt(sc, 10, 64); err == nil && perr == nil && score > 0 {
		s.mu.Lock()
		s.seen[rkey] = score // our own arming: the poll does not hear it back
		s.mu.Unlock()
	}
}

// noteOutcome tells the breaker how an operation ended, and logs what that
// changed, once. ctx is the caller's: an operation it ended is not Redis's
// failure.
func (s *Store) noteOutcome(ctx context.Context, probe bool, err error) {
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
		s.cfg.log.warn("retryredis: Redis is failing; each process paces on its own until it is back",
			"error", err, "failures", int64(s.br.failures), "retry_in_ms", s.cfg.coolOff.Milliseconds())
	case closed: // Info: Redis working again is no fault (the Cooldown's own line is Info too)
		s.cfg.log.info("retryredis: Redis is back; the processes pace together again",
			"down_ms", down.Milliseconds())
	}
}

// exec runs op within the bound. With a client that bounds its I/O by the
// context it runs it here; with another, in a goroutine of its own that
// the bound stops waiting for (it ends when the client's own timeouts end
// it; Close waits for it).
func (s *Store) exec(ctx context.Context, op func(context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if s.direct {
		return op(ctx)
	}
	type result struct {
		reply string
		err   error
	}
	ch := make(chan result, 1)
	s.mu.Lock()
	track := !s.closed // after Close, wg.Wait may be under way: no Add then
	if track {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	go func() {
		if track {
			defer s.wg.Done()
		}
		r, err := op(ctx)
		ch <- result{r, err}
	}()
	select {
	case r := <-ch:
		return r.reply, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// call is Apply's round trip: apply.lua on rkey.
func (s *Store) call(ctx context.Context, rkey string, args []byte) (string, error) {
	return runScript(ctx, s.rdb, applyScript, applySrc, []string{rkey}, s.id, s.channel, args)
}

// runScript runs script by EVALSHA, and by EVAL when Redis has not the
// script (NOSCRIPT: restarted, or SCRIPT FLUSH).
func runScript(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, src string, keys []string, argv ...any) (string, error) {
	r, err := rdb.EvalSha(ctx, script.Hash(), keys, argv...).Text()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		r, err = rdb.Eval(ctx, src, keys, argv...).Text()
	}
	return r, err
}

// inBubble reports whether the caller runs inside a testing/synctest
// bubble: its clock starts at midnight UTC, 2000-01-01, and reads no
// monotonic time (a real clock always has one).
func inBubble() bool {
	now := time.Now()
	return now == now.Round(0) && now.Year() < 2001
}

// Ping reports whether Redis answers within the Store's bound: for a
// readiness or health check. Its error says why not: the dial's error
// when Redis refuses the connection, the deadline when Redis accepts it
// and does not answer. It returns within twice the bound (the second to
// find the cause). It does not count for the breaker, and a Store whose
// Ping fails still works: each Apply then fails, and the Cooldowns pace
// on their own states.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.exec(ctx, func(ctx context.Context) (string, error) { return s.rdb.Ping(ctx).Result() })
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// go-redis retries a refused dial after a backoff longer than the
		// bound, and reports only the deadline: a dial of its own says
		// whether Redis refuses.
		if cause := s.dialError(ctx); cause != nil {
			err = cause
		}
	}
	return fmt.Errorf("retryredis: ping: %w", err)
}

// dialError dials Redis within the bound as the client does (a
// *redis.Client with its Dialer, a *redis.ClusterClient's first address
// over TCP), and returns the dial's error; nil when it connects, when it
// runs out of time (the deadline is then the cause), or for a client of
// another type.
func (s *Store) dialError(ctx context.Context) error {
	var network, addr string
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	switch c := s.rdb.(type) {
	case *redis.Client:
		o := c.Options()
		network, addr, dial = o.Network, o.Addr, o.Dialer
	case *redis.ClusterClient:
		if o := c.Options(); len(o.Addrs) > 0 {
			network, addr = "tcp", o.Addrs[0]
		}
	}
	if addr == "" {
		return nil
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	conn, err := dial(ctx, network, addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	_ = conn.Close()
	return nil
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
	s.closed = true // under mu: no wg.Add after it
	clear(s.listeners)
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
