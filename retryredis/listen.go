package retryredis

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/store"
)

// How a process hears that another armed a key (R24): by push, the
// message apply.lua publishes in the round trip that holds or limits the
// key (heard within that round trip); and, in case a message is lost (the
// subscription was reconnecting, or the process started after), by a poll
// of the index of keys armed lately, every pollEvery and at once after a
// resubscription (heard within a second).

// Listen calls f with the state of a key that another process held or
// limited, soon after it did: by pub/sub within a round trip, and by a
// poll of the index within a second if the message was lost. It never
// calls f for this Store's own Applies. The first Listen starts the
// subscription and the poll (two goroutines, until Close), and returns
// once Redis has confirmed the subscription (or after the Store's
// timeout, Redis failing: the poll hears then). f must not block; a nil f
// is ignored. stop makes f heard no more.
func (s *Store) Listen(f func(key string, s store.State)) (stop func()) {
	if f == nil {
		return func() {}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return func() {}
	}
	id := s.nextID
	s.nextID++
	s.listeners[id] = f
	if !s.started {
		s.started = true
		s.wg.Add(2)
		go s.subscribe()
		go s.pollLoop()
	}
	s.mu.Unlock()
	// Listening when it returns (the store contract): the subscription
	// confirmed, or, Redis failing, the poll hears within a second.
	t := time.NewTimer(s.cfg.timeout)
	select {
	case <-s.listening:
	case <-t.C:
	case <-s.ctx.Done():
	}
	t.Stop()
	return func() {
		s.mu.Lock()
		delete(s.listeners, id)
		s.mu.Unlock()
	}
}

// deliver calls every listener with the key of rkey and st, unless a
// state of the key as new was delivered already.
func (s *Store) deliver(rkey string, st store.State) {
	key, ok := strings.CutPrefix(rkey, s.keyPrefix)
	if !ok || st.Seq == 0 {
		return
	}
	s.mu.Lock()
	if st.Seq <= s.delivered[rkey] {
		s.mu.Unlock()
		return // heard already (pushed, then polled), or older than what was
	}
	s.delivered[rkey] = st.Seq
	fs := maps.Clone(s.listeners)
	s.mu.Unlock()
	for _, f := range fs {
		f(key, st)
	}
}

// subscribe hears the messages of the other processes until Close.
// go-redis resubscribes after a reconnection; each resubscription kicks a
// poll, for what was published meanwhile.
func (s *Store) subscribe() {
	defer s.wg.Done()
	ps := s.rdb.Subscribe(s.ctx, s.channel)
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(256), redis.WithChannelHealthCheckInterval(time.Second),
		redis.WithChannelSendTimeout(time.Second))
	defer func() {
		_ = ps.Close()
		for range ch { // until go-redis's goroutine ends (goleak)
		}
	}()
	subscribed := false
	for {
		select {
		case <-s.ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" && subscribed {
					s.pollNow()
				}
				if !subscribed {
					close(s.listening)
				}
				subscribed = true
			case *redis.Message:
				s.heard(m.Payload)
			}
		}
	}
}

// heard reads a message; one from this Store, or junk, is left out.
func (s *Store) heard(payload string) {
	from, rkey, st, err := parseMessage(payload)
	if err != nil || from == s.id {
		return
	}
	s.deliver(rkey, st)
}

func (s *Store) pollNow() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// pollLoop polls the index at once, then every pollEvery, until Close.
func (s *Store) pollLoop() {
	defer s.wg.Done()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		s.poll()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// poll reads the index, and the state of each key in it whose score it
// has not heard of (armed by another process since the last poll, or
// before this one started), and delivers them. One round trip when
// nothing is new, two when something is. It counts for the breaker as an
// Apply does.
func (s *Store) poll() {
	ok, probe := s.br.allow(time.Now())
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	entries, err := s.rdb.ZRevRangeWithScores(ctx, s.index, 0, indexMax-1).Result()
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		entries, err = nil, nil // junk at the index: nothing armed, and the next arming replaces it
	}
	s.noteOutcome(s.ctx, probe, err) // (s.ctx: the poll's own timeout is Redis failing, Close is not)
	if err != nil {
		return
	}
	fresh := s.fresh(entries)
	if len(fresh) == 0 {
		return
	}
	ctx, cancel = context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	cmds := s.read(ctx, fresh)
	for i, z := range fresh {
		reply, err := cmds[i].Text()
		if err != nil {
			continue
		}
		if st, err := parseReply(reply); err == nil {
			s.deliver(z.Member.(string), st)
		}
		s.mu.Lock()
		s.seen[z.Member.(string)] = int64(z.Score)
		s.mu.Unlock()
	}
}

// fresh returns the entries whose score this Store has not heard of, and
// forgets those that left the index.
func (s *Store) fresh(entries []redis.Z) []redis.Z {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := make(map[string]int64, len(entries))
	var out []redis.Z
	for _, z := range entries {
		m, ok := z.Member.(string)
		if !ok || !strings.HasPrefix(m, s.keyPrefix) {
			continue
		}
		in[m] = int64(z.Score)
		if seen, ok := s.seen[m]; !ok || seen != int64(z.Score) {
			out = append(out, z)
		}
	}
	for m := range s.seen {
		if _, ok := in[m]; !ok {
			delete(s.seen, m)
		}
	}
	for m := range s.delivered {
		if _, ok := in[m]; !ok {
			delete(s.delivered, m)
		}
	}
	return out
}

// read runs apply.lua with no ops (a read: nothing written) on each
// entry's key, in one pipeline; EVAL where Redis lacks the script.
func (s *Store) read(ctx context.Context, entries []redis.Z) []*redis.Cmd {
	argv := []any{s.id, "", ""}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(entries))
	for i, z := range entries {
		cmds[i] = pipe.EvalSha(ctx, applyScript.Hash(), []string{z.Member.(string)}, argv...)
	}
	_, _ = pipe.Exec(ctx)
	for i, z := range entries {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			cmds[i] = s.rdb.Eval(ctx, applySrc, []string{z.Member.(string)}, argv...)
		}
	}
	return cmds
}
