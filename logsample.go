package retryhttp

import (
	"net/url"
	"sync"
	"time"
)

// logSampler bounds the entries that repeat (R14): at most one a second
// for each message and provider (the URL's scheme://host), the next one
// written with the count of those it stands for. The first of a second is
// written at once, so that a single give-up is never late.
type logSampler struct {
	mu   sync.Mutex
	last map[sampleKey]*sampled
}

type sampleKey struct{ msg, origin string }

type sampled struct {
	at   time.Time // when the last entry was written
	held int       // entries not written since
}

// sampleEvery is how often an entry that repeats is written; maxSampled
// bounds the providers remembered (past it, the memory starts again).
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
	if s.last == nil || len(s.last) >= maxSampled {
		s.last = make(map[sampleKey]*sampled)
	}
	e := s.last[k]
	if e == nil {
		s.last[k] = &sampled{at: now}
		return 1, true
	}
	if now.Sub(e.at) < sampleEvery {
		e.held++
		return 0, false
	}
	n = e.held + 1
	e.at, e.held = now, 0
	return n, true
}
