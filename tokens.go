package retryhttp

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
)

type tokensKey struct{}

// WithTokens returns a copy of ctx that says the call it carries costs n
// tokens against the provider's token limits (R23): what the provider
// counts, such as the prompt's tokens as tiktoken counts them plus the
// output cap (max_tokens), for OpenAI's TPM. A Cooldown that paces the
// call's key by tokens charges n instead of its estimate (EstimateTokens);
// on Anthropic's input-token limit it charges n less the output cap the
// body asks for, and on its output-token limit that cap. n <= 0 returns ctx
// unchanged: the call is estimated.
func WithTokens(ctx context.Context, n int64) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, tokensKey{}, n)
}

// EstimateTokens returns what req is estimated to cost against a
// provider's token limit when the caller does not say (WithTokens):
// ceil(body length ÷ 4), the rule of thumb of OpenAI's own guides (a token
// is about four characters of English), plus the output cap a JSON body
// asks for (max_tokens, max_completion_tokens, max_output_tokens, or
// generationConfig.maxOutputTokens), since providers charge the cap when
// they admit a call. The body is read from a GetBody copy, at most its
// first 64 KiB, never from req.Body; its length is ContentLength when
// that is known. 0 without a body, or with a body that can be had only
// from req.Body (no GetBody) and no ContentLength. It never panics (a
// GetBody or a Read that panics counts what came before it), and never
// holds a call: the copy is read for at most 40 ms of real time, and not
// past req's context; one that takes longer counts as ContentLength.
func EstimateTokens(req *http.Request) int64 {
	in, out := estimate(req)
	return in + out
}

// estimate returns req's input tokens (ceil(length ÷ 4)) and its output
// cap (EstimateTokens).
func estimate(req *http.Request) (in, out int64) {
	if req == nil || req.Body == nil || req.Body == http.NoBody {
		return 0, 0
	}
	n := max(req.ContentLength, 0)
	if req.GetBody != nil {
		if k, c, ok := readCopy(req); ok {
			if req.ContentLength <= 0 {
				n = k
			}
			out = c
		}
	}
	return ceilDiv4(n), out
}

// readCopy reads the first maxDrain bytes of a GetBody copy of req's body,
// and returns how many it read and the output cap they ask for; ok is
// false when there is no copy (GetBody failed or panicked) or its read was
// given up. A Read that panics, or returns a count that cannot be, ends
// the read: what came before counts. The read runs on a goroutine of its
// own, bounded in real time (bodyTimeout) and by req's context: a copy
// whose Read blocked held a call with a 200 ms deadline past 3 s (issue
// 29). A read given up is left to that goroutine, which closes the copy
// once its Read returns (never under it: io.ReadCloser does not promise
// that is safe) and only then gives its buffer back to the pool.
func readCopy(req *http.Request) (n, outCap int64, ok bool) {
	b := getBody(req)
	if b == nil {
		return 0, 0, false
	}
	r := &copyRead{body: b, buf: estimateBufs.Get().(*[]byte), done: make(chan struct{})}
	go r.run()
	timer := time.NewTimer(bodyTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
	case <-req.Context().Done():
	}
	if r.state.CompareAndSwap(copyReading, copyGivenUp) {
		return 0, 0, false // the goroutine closes the copy
	}
	<-r.done
	outCap = signal.OutputCap((*r.buf)[:r.n])
	closeRecovered(r.body)
	estimateBufs.Put(r.buf)
	return int64(r.n), outCap, true
}

// getBody returns a GetBody copy of req's body; nil when GetBody fails or
// panics.
func getBody(req *http.Request) (b io.ReadCloser) {
	defer func() {
		if recover() != nil {
			b = nil
		}
	}()
	if b, err := req.GetBody(); err == nil {
		return b
	}
	return nil
}

// copyRead is the read of a GetBody copy for an estimate (readCopy).
type copyRead struct {
	body  io.ReadCloser
	buf   *[]byte
	n     int // of buf, read
	state atomic.Int32
	done  chan struct{} // closed when the read has ended and readCopy has it
}

const (
	copyReading = iota
	copyDone    // the read ended: readCopy has the bytes
	copyGivenUp // readCopy gave up: the goroutine cleans up
)

func (r *copyRead) run() {
	r.read()
	if r.state.CompareAndSwap(copyReading, copyDone) {
		close(r.done)
		return
	}
	closeRecovered(r.body) // given up: the Read has returned, nobody else has the buffer
	estimateBufs.Put(r.buf)
}

// read reads the copy into buf as io.ReadFull does, ending at a panic, a
// count out of range, or reads that go on bringing nothing.
func (r *copyRead) read() {
	defer func() { _ = recover() }()
	buf := *r.buf
	for empty := 0; r.n < len(buf) && empty < maxEmptyReads; {
		k, err := r.body.Read(buf[r.n:])
		if k < 0 || k > len(buf)-r.n {
			return
		}
		r.n += k
		if err != nil {
			return
		}
		if k == 0 {
			empty++
		}
	}
}

// maxEmptyReads ends a read of a copy that returns nothing and no error,
// as bufio does (io.ReadFull would spin on it for ever).
const maxEmptyReads = 100

// ceilDiv4 is ceil(n ÷ 4) for n >= 0, with no overflow: (n + 3) / 4 wraps
// for a ContentLength near the largest int64, and a negative cost would
// credit a token lane instead of charging it.
func ceilDiv4(n int64) int64 {
	q := n / 4
	if n%4 != 0 {
		q++
	}
	return q
}

var estimateBufs = sync.Pool{New: func() any { b := make([]byte, maxDrain); return &b }}

// costs returns what a call costs on each lane (R23): 1 request; its
// tokens (WithTokens, else EstimateTokens); its input tokens (the tokens
// less the output cap); and its output cap.
func callCosts(req *http.Request) [numLanes]float64 {
	in, out := estimate(req)
	total := in + out
	if n, ok := req.Context().Value(tokensKey{}).(int64); ok && n > 0 {
		total, in = n, max(n-out, 0)
		if out > n {
			in = n
		}
	}
	return [numLanes]float64{1, float64(total), float64(in), float64(out)}
}
