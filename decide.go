package retryhttp

import "time"

// situation is everything the retry decision depends on after a try, as
// plain values: decide is a pure function of it, so a test can exhaust it.
type situation struct {
	class      Class
	try        int           // tries sent so far, this one included (>= 1)
	maxRetries int           // resends allowed after the first try (>= 0)
	replayable bool          // the body can be sent again (R10)
	quotaOK    bool          // the Quota allows a retry (R12); true without a Quota
	backoff    time.Duration // the transport's own delay for this retry (R4)
	ask        time.Duration // the server's ask: Retry-After, retry-after-ms or a body's retryDelay (R5, R19)
	hasAsk     bool
	cooldown   time.Duration // what is left of the shared Cooldown (R17); 0 when none
	left       time.Duration // what the deadline and the Budget leave (R7); maxDuration when neither
	budget     bool          // the request carries a Budget (R8)
	maxWait    time.Duration // no single wait this long or longer (WithMaxWait); 0 means DefaultMaxWait
	down       bool          // the key's circuit refuses a retry now (R25)
}

// decision is what the transport does after a try.
type decision struct {
	outcome Outcome
	wait    time.Duration // the wait before the next try; 0 unless outcome is Retrying
	// from says which side set the wait: for Retrying, the wait slept; for
	// OutOfTime, the wait that did not fit. FromBackoff otherwise.
	from WaitSource
	// rateLimited: the request fails fast with ErrRateLimited instead of
	// handing back what it has (R8).
	rateLimited bool
}

// decide applies rules R3, R4, R7, R8, R9, R10, R12, R17 and R25 to one
// try. The first reason to stop wins, in the order of R9, then the circuit.
func decide(s situation) decision {
	var d decision
	switch {
	case s.class == Permanent:
		return decision{outcome: Done}
	case s.try > s.maxRetries: // tries - 1 resends made; no overflow even at math.MaxInt (R3)
		d.outcome = Exhausted
	case !s.replayable:
		d.outcome = NotReplayable
	case !s.quotaOK:
		d.outcome = NoQuota
	case s.down:
		return decision{outcome: Unavailable} // as when the retries run out (R25): handed back, never "busy"
	default:
		// R4, R17: the largest of the transport's backoff, the server's ask
		// and the rest of the cooldown; the server's side is never
		// shortened or capped.
		wait, from := s.backoff, FromBackoff
		if s.hasAsk && s.ask > wait {
			wait, from = s.ask, FromRetryAfter
		}
		if s.cooldown > wait {
			wait, from = s.cooldown, FromCooldown
		}
		d.from = from
		if wait < min(s.left, maxWaitOf(s)) { // R7: "not shorter than left" does not fit
			d.outcome, d.wait = Retrying, wait
			return d
		}
		d.outcome = OutOfTime
	}
	// R8: with a Budget, a rate limit that cannot be waited out fails fast:
	// the last try was Throttled, or the provider's own ask (its Retry-After,
	// or the cooldown another call was given) alone does not fit.
	if s.budget {
		providerAsk := max(s.cooldown, 0)
		if s.hasAsk {
			providerAsk = max(providerAsk, s.ask)
		}
		d.rateLimited = s.class == Throttled ||
			d.outcome == OutOfTime && (s.hasAsk || s.cooldown > 0) && providerAsk >= min(s.left, maxWaitOf(s))
	}
	return d
}

// maxWaitOf is the situation's longest wait.
func maxWaitOf(s situation) time.Duration {
	if s.maxWait <= 0 {
		return DefaultMaxWait
	}
	return s.maxWait
}
