package signal

import (
	"github.com/retryhttp/retryhttp/store"
	"net/http"
	"time"
)

// The provider's counts of each lane (R17, R23), as the Cooldown paces by
// them; ratelimit.go reads the headers' values.

// Counts are a provider's count of one limit as it states it: Limit units
// a window, Remaining of them left, the window full again in Window (read
// at the resolution Res: a reset in whole seconds is good to a second).
// OK is false when the answer states no count of the limit; the zero
// Counts is that.
type Counts struct {
	Limit, Remaining int64
	Window, Res      time.Duration
	OK               bool
}

// LaneCounts reads the provider's count of each lane, for pacing (R17,
// R23): OpenAI's x-ratelimit-{limit,remaining,reset}-requests and -tokens,
// Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset}, and the IETF draft's
// RateLimit-{Limit,Remaining,Reset} (requests). When a lane has more than
// one set, the slowest wins (the longest window per unit spent; of two as
// slow, the first named here), and a set with nothing spent yet says
// nothing of the rate. A count that is negative (Azure's -1) or does not
// parse leaves its set out.
func LaneCounts(h http.Header, now time.Time) (out [NumLanes]Counts) {
	for _, s := range countSets {
		c, ok := s.read(h, now)
		if !ok {
			continue
		}
		best := &out[s.lane]
		if !best.OK || c.Limit > c.Remaining && (best.Limit <= best.Remaining ||
			float64(c.Window)/float64(c.Limit-c.Remaining) > float64(best.Window)/float64(best.Limit-best.Remaining)) {
			*best = c
		}
	}
	return out
}

// StatesLimits reports whether h states the provider's request limit in
// one of the dialects LaneCounts reads (a provider that states one states
// its others with it): a success that says so is worth reading (R27: a
// fan-out on a key whose limit was stated is paced from its first try).
// Three lookups of h, no allocation: it runs on every success of a key a
// Cooldown does not watch.
func StatesLimits(h http.Header) bool {
	return len(h) > 0 && (len(h["X-Ratelimit-Limit-Requests"]) > 0 || len(h["Anthropic-Ratelimit-Requests-Limit"]) > 0 ||
		len(h["Ratelimit-Limit"]) > 0)
}

// first is h.Get(name) for a name already canonical, as every name here
// is: h.Get canonicalizes its argument on every call, which was two thirds
// of reading a success's counts.
func first(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// RequestCounts is the request lane's count (LaneCounts).
func RequestCounts(h http.Header, now time.Time) Counts {
	return LaneCounts(h, now)[store.Requests]
}

// countSets are the count header sets LaneCounts reads, by lane.
var countSets = [...]countSet{
	{store.Requests, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", parseResetDuration, true},
	{store.Requests, "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", parseResetTime, false},
	{store.Requests, "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", parseResetSeconds, false},
	{store.Tokens, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", parseResetDuration, true},
	{store.Tokens, "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset", parseResetTime, false},
	{store.InputTokens, "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", parseResetTime, false},
	{store.OutputTokens, "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", parseResetTime, false},
}

// LaneResets returns, per lane, the reset of an exhausted limit of it
// (R18's pairs, as ParseRateLimitReset reads them; the IETF structured
// field counts for the request lane), with the resolution it was written
// at. Its parts' rules are ParseRateLimitReset's.
func LaneResets(h http.Header, now time.Time) (d, res [NumLanes]time.Duration, ok [NumLanes]bool) {
	var f rlFields
	f.collect(h)
	for i, p := range rlPairs {
		remaining, reset := f[2*i].first(), f[2*i+1].first()
		if !isZeroCount(remaining) || reset == "" {
			continue
		}
		if r, valid := p.parse(reset, now); valid && (!ok[p.lane] || r > d[p.lane]) {
			d[p.lane], ok[p.lane], res[p.lane] = r, true, resetResolution(reset)
			if p.ms {
				res[p.lane] = time.Millisecond
			}
		}
	}
	for _, line := range f[rlStructured].vals {
		if r, valid := parseRateLimitField(line); valid && (!ok[store.Requests] || r > d[store.Requests]) {
			d[store.Requests], ok[store.Requests], res[store.Requests] = r, true, time.Second
		}
	}
	return d, res, ok
}

type countSet struct {
	lane                    store.LaneID
	limit, remaining, reset string
	parse                   func(v string, now time.Time) (time.Duration, bool)
	ms                      bool // written to the millisecond (OpenAI's "1s" is 1000 ms), whatever the last figure
}

func (s countSet) read(h http.Header, now time.Time) (Counts, bool) {
	lv, rv, wv := trimSpaceTab(first(h, s.limit)), trimSpaceTab(first(h, s.remaining)), trimSpaceTab(first(h, s.reset))
	if lv == "" || rv == "" || wv == "" || !allDigits(lv) || !allDigits(rv) {
		return Counts{}, false
	}
	limit, okL := parseCount(lv)
	remaining, okR := parseCount(rv)
	window, okW := s.parse(wv, now)
	if !okL || !okR || !okW {
		return Counts{}, false
	}
	res := resetResolution(wv)
	if s.ms {
		res = min(res, time.Millisecond)
	}
	return Counts{Limit: limit, Remaining: remaining, Window: window, Res: res, OK: true}, true
}
