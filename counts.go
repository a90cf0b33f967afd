package retryhttp

import (
	"net/http"
	"time"
)

// The provider's counts of each lane (R17, R23), as the Cooldown paces by
// them; ratelimit.go reads the headers' values.

// counts are a provider's count of one limit as it states it: limit units
// a window, remaining of them left, the window full again in window (at
// resolution res).
type counts struct {
	limit, remaining int64
	window, res      time.Duration
	ok               bool
}

// laneCounts reads the provider's count of each lane, for pacing (R17,
// R23): OpenAI's x-ratelimit-{limit,remaining,reset}-requests and -tokens,
// Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset}, and the IETF draft's
// RateLimit-{Limit,Remaining,Reset} (requests). When a lane has more than
// one set, the slowest wins (the longest window per unit spent; of two as
// slow, the first named here), and a set with nothing spent yet says
// nothing of the rate. A count that is negative (Azure's -1) or does not
// parse leaves its set out.
func laneCounts(h http.Header, now time.Time) (out [numLanes]counts) {
	for _, s := range countSets {
		c, ok := s.read(h, now)
		if !ok {
			continue
		}
		best := &out[s.lane]
		if !best.ok || c.limit > c.remaining && (best.limit <= best.remaining ||
			float64(c.window)/float64(c.limit-c.remaining) > float64(best.window)/float64(best.limit-best.remaining)) {
			*best = c
		}
	}
	return out
}

// requestCounts is the request lane's count (laneCounts).
func requestCounts(h http.Header, now time.Time) counts {
	return laneCounts(h, now)[laneRequests]
}

// countSets are the count header sets laneCounts reads, by lane.
var countSets = [...]countSet{
	{laneRequests, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", parseResetDuration, true},
	{laneRequests, "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", parseResetTime, false},
	{laneRequests, "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", parseResetSeconds, false},
	{laneTokens, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", parseResetDuration, true},
	{laneTokens, "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset", parseResetTime, false},
	{laneInput, "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", parseResetTime, false},
	{laneOutput, "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", parseResetTime, false},
}

// laneResets returns, per lane, the reset of an exhausted limit of it
// (R18's pairs, as ParseRateLimitReset reads them; the IETF structured
// field counts for the request lane), with the resolution it was written
// at. Its parts' rules are ParseRateLimitReset's.
func laneResets(h http.Header, now time.Time) (d, res [numLanes]time.Duration, ok [numLanes]bool) {
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
		if r, valid := parseRateLimitField(line); valid && (!ok[laneRequests] || r > d[laneRequests]) {
			d[laneRequests], ok[laneRequests], res[laneRequests] = r, true, time.Second
		}
	}
	return d, res, ok
}

type countSet struct {
	lane                    laneID
	limit, remaining, reset string
	parse                   func(v string, now time.Time) (time.Duration, bool)
	ms                      bool // written to the millisecond (OpenAI's "1s" is 1000 ms), whatever the last figure
}

func (s countSet) read(h http.Header, now time.Time) (counts, bool) {
	lv, rv, wv := trimSpaceTab(h.Get(s.limit)), trimSpaceTab(h.Get(s.remaining)), trimSpaceTab(h.Get(s.reset))
	if lv == "" || rv == "" || wv == "" || !allDigits(lv) || !allDigits(rv) {
		return counts{}, false
	}
	limit, okL := parseCount(lv)
	remaining, okR := parseCount(rv)
	window, okW := s.parse(wv, now)
	if !okL || !okR || !okW {
		return counts{}, false
	}
	res := resetResolution(wv)
	if s.ms {
		res = min(res, time.Millisecond)
	}
	return counts{limit: limit, remaining: remaining, window: window, res: res, ok: true}, true
}
