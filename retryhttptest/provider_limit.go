package retryhttptest

import (
	"math"
	"time"
)

// The Provider's limits: a token bucket each, and the decision that admits
// a request only when every one of them has room for its cost.

// A limitKind names one of a Provider's limits, in the order they are
// checked and their headers written.
type limitKind uint8

const (
	requestsLimit limitKind = iota
	tokensLimit
	inputTokensLimit
	outputTokensLimit
	numLimits
	outageKind = numLimits // what refused a request during an Outage
)

// slack is the float rounding a bucket forgives, relative to its size: a
// refill counted in two steps may come out a few ulps short of one counted
// in one. It is far less than a nanosecond's refill at any rate a test
// uses, so a client that comes back a nanosecond early is still refused.
const slack = 1e-12

// A bucket is one limit's state. The zero bucket is no limit: everything has
// room in it.
type bucket struct {
	on    bool
	rate  float64 // refill a second
	size  float64
	level float64 // below 0 in debt, after a cost larger than the bucket
	last  time.Time
}

func newBucket(l Limit, now time.Time) bucket {
	if !(l.Rate > 0) || math.IsInf(l.Rate, 1) {
		return bucket{}
	}
	size := l.Size
	if size <= 0 {
		size = max(1, int64(math.Ceil(l.Rate)))
	}
	return bucket{on: true, rate: l.Rate, size: float64(size), level: float64(size), last: now}
}

// refill counts the bucket up to now. A now earlier than one already seen
// adds nothing.
func (b *bucket) refill(now time.Time) {
	if b.on && now.After(b.last) {
		b.level = min(b.size, b.level+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
}

// room says whether the bucket has room for cost now, and if not how long
// until it has; large when cost is more than the whole bucket (room is then
// a full bucket).
func (b *bucket) room(cost int64) (ok bool, wait time.Duration, large bool) {
	if !b.on || cost <= 0 {
		return true, 0, false
	}
	need := float64(cost)
	if need > b.size {
		need, large = b.size, true
	}
	if b.level+b.slack() >= need {
		return true, 0, large
	}
	// The least wait whose refill, as refill counts it, makes room: a
	// client that comes back when it was told finds the room it was
	// promised, and one that comes back a nanosecond earlier does not.
	fits := func(w time.Duration) bool { return b.level+w.Seconds()*b.rate+b.slack() >= need }
	w := seconds((need - b.level) / b.rate)
	for w < math.MaxInt64 && !fits(w) {
		w++
	}
	for w > 1 && fits(w-1) {
		w--
	}
	return false, w, large
}

func (b *bucket) slack() float64 { return slack * b.size }

// A limitState is what a limit's headers say after a request.
type limitState struct {
	on        bool
	size      int64         // the limit: the bucket's size
	perMinute int64         // its rate a minute, rounded
	remaining int64         // whole tokens left, never below 0
	reset     time.Duration // until the bucket is full again; 0 when it is
}

func (b *bucket) state() limitState {
	if !b.on {
		return limitState{}
	}
	s := limitState{on: true, size: int64(b.size), perMinute: int64(math.Round(b.rate * 60))}
	s.remaining = max(0, int64(math.Floor(b.level+b.slack())))
	if b.level+b.slack() < b.size {
		s.reset = seconds((b.size - b.level) / b.rate)
	}
	return s
}

// seconds converts s to a Duration, rounded up to the nanosecond so that a
// client waiting it never comes back before the room is there.
func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	if s >= float64(math.MaxInt64)/1e9 {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(s * 1e9))
}

// A verdict is the provider's decision on one request.
type verdict struct {
	now     time.Time
	costs   [numLimits]int64
	refused bool
	by      limitKind     // the limit that refused, or outageKind
	large   bool          // the cost is larger than by's whole bucket
	never   bool          // and the dialect (OpenAI's) never admits it: no wait helps
	wait    time.Duration // until by has room for the cost (the outage is over); 0 when never
	states  [numLimits]limitState
}

func (v *verdict) admitted() bool { return !v.refused }

// decide admits or refuses a request for model of cost at the clock's now,
// charges every limit of the model's (Provider.buckets) when it admits it,
// and counts it, in Stats and in the model's. The caller does not hold p.mu.
func (p *Provider) decide(model string, cost Cost) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	limits := p.buckets(model)
	v := verdict{now: p.clk.Now(), costs: [numLimits]int64{cost.Requests, cost.Tokens, cost.InputTokens, cost.OutputTokens}}
	for k := range limits {
		limits[k].refill(v.now)
	}
	if v.now.Before(p.down) {
		v.refused, v.by, v.wait = true, outageKind, p.down.Sub(v.now)
	} else {
		p.check(limits, &v)
	}
	if !v.refused {
		for k := range limits {
			if limits[k].on && v.costs[k] > 0 {
				limits[k].level -= float64(v.costs[k])
			}
		}
	}
	p.stats.count(&v, cost)
	p.modelStats(model).count(&v, cost)
	for k := range limits {
		v.states[k] = limits[k].state()
	}
	return v
}

// count counts in s a request of cost that v admitted or refused.
func (s *ProviderStats) count(v *verdict, cost Cost) {
	s.Requests++
	if !v.refused {
		s.Admitted++
		s.Tokens += max(0, cost.Tokens)
		s.InputTokens += max(0, cost.InputTokens)
		s.OutputTokens += max(0, cost.OutputTokens)
		s.LastAdmitted = v.now
		return
	}
	s.Refused++
	switch v.by {
	case requestsLimit:
		s.RefusedRequests++
	case tokensLimit:
		s.RefusedTokens++
	case inputTokensLimit:
		s.RefusedInputTokens++
	case outputTokensLimit:
		s.RefusedOutputTokens++
	default:
		s.RefusedOutage++
	}
	if v.large {
		s.TooLarge++
	}
}

// check refuses v when one of limits has no room for its cost, naming the
// one that refused: in the OpenAI dialect a cost larger than its whole
// bucket first (it can never succeed), else the limit with the longest wait
// (the first of equals), so that a client that waits what it is told finds
// room.
func (p *Provider) check(limits *[numLimits]bucket, v *verdict) {
	for k := range limits {
		ok, wait, large := limits[k].room(v.costs[k])
		never := large && p.cfg.Dialect == OpenAIDialect
		if ok && !never {
			continue
		}
		if never {
			wait = 0
		}
		if !v.refused || never && !v.never || !v.never && !never && wait > v.wait {
			v.refused, v.by, v.large, v.never, v.wait = true, limitKind(k), large, never, wait
		}
	}
}
