package bench

// The fake provider of the goodput scenario (goodput.go): an LLM API on
// loopback whose rate limit is a token bucket, and which says what it says
// about it in a provider's dialect (dialect.go).

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A Bucket is a token bucket: it holds at most burst tokens, starts full and
// refills continuously at rate tokens a second. Each admitted request takes
// one token. It is safe for concurrent use by multiple goroutines.
type Bucket struct {
	rate, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time // the latest now seen: tokens are counted up to it
}

// NewBucket returns a full bucket of burst tokens that refills at rate
// tokens a second from now on. rate and burst must be positive.
func NewBucket(rate float64, burst int, now time.Time) *Bucket {
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// A Decision is the bucket's answer to one request.
type Decision struct {
	OK        bool          // the request got a token
	Remaining int           // whole tokens left after this request
	Next      time.Duration // until the next whole token; 0 when OK
	Reset     time.Duration // until the bucket is full again
}

// Take asks for one token at now. A now earlier than one already seen (two
// requests racing for the lock) adds no tokens, so the bucket never admits
// more than burst + rate × (latest now - start).
func (b *Bucket) Take(now time.Time) Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	var d Decision
	if b.tokens >= 1 {
		b.tokens--
		d.OK = true
	} else {
		d.Next = seconds((1 - b.tokens) / b.rate)
	}
	d.Remaining = int(math.Floor(b.tokens))
	d.Reset = seconds((b.burst - b.tokens) / b.rate)
	return d
}

// seconds converts s to a Duration, rounded up to the nanosecond so that a
// client waiting it never comes back before the token is there.
func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(s * 1e9))
}

// FormatReset writes d as OpenAI writes x-ratelimit-reset-*: Go's duration
// syntax at millisecond resolution ("20ms", "1.5s", "6m0s"), rounded up so
// that the reset is never earlier than the bucket's; "0s" when d <= 0.
func FormatReset(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	if d < time.Second {
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}

// ceilUnits is d in whole units, rounded up, at least 1.
func ceilUnits(d, unit time.Duration) int64 {
	return max(1, int64((d+unit-1)/unit))
}

// chatRequest is the body every call POSTs.
var chatRequest = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`)

// A Provider is a fake LLM API on loopback that admits Rate requests a
// second with a burst of Burst, one bucket for all its clients. A request
// that gets a token (when it arrives) is answered 200 with CompletionBody
// after Latency, as a model takes its time to answer; the others are
// answered 429 at once, as real providers refuse at once. What the answers
// say about the limit is the Dialect's. It reads every request body to the
// end.
type Provider struct {
	Rate, Burst int
	Dialect     Dialect
	Latency     time.Duration // before a 200; 0 answers at once
	URL         string        // where to POST: the server's /v1/chat/completions
	Start       time.Time

	srv    *server
	bucket *Bucket

	admitted, limited, abandoned atomic.Int64
	lastAdmit                    atomic.Int64 // ns after Start of the latest admission
}

// NewProvider starts a provider with a full bucket. Close it when done.
func NewProvider(rate, burst int, d Dialect, latency time.Duration) *Provider {
	p := &Provider{Rate: rate, Burst: burst, Dialect: d, Latency: latency, Start: time.Now()}
	p.bucket = NewBucket(float64(rate), burst, p.Start) // before the server starts: its handler reads both
	p.srv = newServer(p.serve)
	p.URL = p.srv.URL + "/v1/chat/completions"
	return p
}

// serve answers one request: the token is taken as it arrives, so a slow
// answer holds no token back from the requests after it.
func (p *Provider) serve(_ *server, w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now()
	d := p.bucket.Take(now)
	h := w.Header()
	body := p.Dialect.answer(h, d, p.Burst, now)
	if !d.OK {
		p.limited.Add(1)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(body)
		return
	}
	p.admitted.Add(1)
	for ns := int64(now.Sub(p.Start)); ; {
		old := p.lastAdmit.Load()
		if ns <= old || p.lastAdmit.CompareAndSwap(old, ns) {
			break
		}
	}
	if p.Latency > 0 {
		t := time.NewTimer(p.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			// The client gave up, or the run is over and Close is waiting
			// for this handler: nobody will read the answer.
			t.Stop()
			p.abandoned.Add(1)
			return
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(CompletionBody)))
	w.Write(CompletionBody)
}

// ProviderStats is what a provider counted.
type ProviderStats struct {
	Requests  int64         // every request received
	Admitted  int64         // given a token (answered 200 unless the client left first)
	Abandoned int64         // of Admitted, those whose client left before the answer
	Limited   int64         // answered 429
	Conns     int64         // TCP connections accepted
	AdmitSpan time.Duration // from Start to the latest admission
}

// Stats returns the provider's counts so far.
func (p *Provider) Stats() ProviderStats {
	return ProviderStats{
		Requests:  p.srv.requests.Load(),
		Admitted:  p.admitted.Load(),
		Abandoned: p.abandoned.Load(),
		Limited:   p.limited.Load(),
		Conns:     p.srv.conns.Load(),
		AdmitSpan: time.Duration(p.lastAdmit.Load()),
	}
}

// Close closes every connection and stops the server.
func (p *Provider) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}
