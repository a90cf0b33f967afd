package retryhttp

import (
	"container/list"
	"net/url"
	"sync"
	"time"
)

// logSampler bounds the entries that repeat (R14): at most one a second
// for each message and provider (the URL's scheme://host), the next one
// written with the count of those it stands for. The first of a second is
// written at once, so that a single give-up is never late.
//
// It remembers maxSampled lines (a message and a provider), and makes
// room by forgetting the one written longest ago, only once its second
// has passed: its next entry would be written at once all the same. The
// count it held is not lost: the next entry of its message that takes a
// room carries it. While every line remembered was written within the
// second, the lines of the providers not remembered are sampled together,
// one a second for each message, the entry written standing for all of
// them. So memory is bounded, each provider writes about an entry a second
// however many there are, and every entry is counted once.
type logSampler struct {
	mu    sync.Mutex
	last  map[sampleKey]*list.Element // of *sampled
	order list.List                   // of *sampled, the one written longest ago first
	spill map[string]*sampled         // by message: the lines not remembered
}

type sampleKey struct{ msg, origin string }

type sampled struct {
	key  sampleKey
	at   time.Time // when the last entry was written
	held int       // entries not written since
}

// sampleEvery is how often an entry that repeats is written; maxSampled
// bounds the lines remembered.
const (
	sampleEvery = time.Second
	maxSampled  = 1024
)

// take reports whether an entry of msg about u may be written at now,
// and how many entries it stands for (itself included).
func (s *logSampler) take(msg string, u *url.URL, now time.Time) (n int, ok bool) {
	if s == nil {
		return 1, true
	}
	k := sampleKey{msg: msg}
	if u != nil {
		k.origin = u.Scheme + "://" + u.Host
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if el := s.last[k]; el != nil {
		e := el.Value.(*sampled)
		if n, ok = e.take(now); ok {
			s.order.MoveToBack(el)
		}
		return n, ok
	}
	if s.last == nil {
		s.last, s.spill = make(map[sampleKey]*list.Element), make(map[string]*sampled)
	}
	sp := s.spillOf(msg, now)
	if !s.makeRoom(now) {
		return sp.take(now)
	}
	s.last[k] = s.order.PushBack(&sampled{key: k, at: now})
	n, sp.held = 1+sp.held, 0 // and it carries what the lines forgotten held
	return n, true
}

// makeRoom makes room for a line not remembered: when the memory is full,
// it forgets the line written longest ago if its second has passed, and
// moves its held count to its message's spill. false: no room.
func (s *logSampler) makeRoom(now time.Time) bool {
	if len(s.last) < maxSampled {
		return true
	}
	front := s.order.Front()
	old := front.Value.(*sampled)
	if now.Sub(old.at) < sampleEvery {
		return false
	}
	s.order.Remove(front)
	delete(s.last, old.key)
	s.spillOf(old.key.msg, now).held += old.held
	return true
}

// spillOf is msg's sample of the lines not remembered, made as if its
// last entry were a second before now: the first past the bound is
// written at once.
func (s *logSampler) spillOf(msg string, now time.Time) *sampled {
	sp := s.spill[msg]
	if sp == nil {
		sp = &sampled{at: now.Add(-sampleEvery)}
		s.spill[msg] = sp
	}
	return sp
}

// take is one entry of e's at now: whether it is written, and how many
// entries it stands for.
func (e *sampled) take(now time.Time) (n int, ok bool) {
	if now.Sub(e.at) < sampleEvery {
		e.held++
		return 0, false
	}
	n = e.held + 1
	e.at, e.held = now, 0
	return n, true
}
