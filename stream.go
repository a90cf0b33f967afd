package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/signal"
)

// Streams (R26): with WithStreamRetry, a response the transport would hand
// back as it is, a 2xx event stream, is read ahead to its first token on the
// call's own goroutine, before RoundTrip returns. The loop meets it in hear
// (readStream), and the Cooldown hears its error event as the status it
// stands for (tellCooldownOfStream).

// WithStreamRetry makes the transport retry an LLM stream that fails before
// its first token (R26). A 2xx response whose Content-Type is
// text/event-stream, which the transport would hand back as it is, is read
// ahead, before RoundTrip returns, until its first token: the first event
// that carries the model's output. An error event first (Anthropic's
// overloaded_error, an OpenAI or Gemini error object) fails the try as the
// status it stands for would (R2): retried, waited, counted and logged as
// any try. A token first, the stream's end, or 64 KiB with no token hands
// the response over at once, and the caller reads exactly the bytes the
// provider sent; it is never retried after that (R6).
//
// A firstToken above 0 also bounds the wait for the first token: a stream
// with none firstToken after its try was sent is cut (its body closed) and
// the try is Transient, as a try timeout (R13). Zero or less leaves the
// wait to the caller's context. The default is off: no stream is read
// ahead. Attempt.FirstToken and Attempt.StreamError say what each try's
// stream did.
func WithStreamRetry(firstToken time.Duration) Option {
	return func(c *config) { c.streamRetry, c.firstToken = true, max(firstToken, 0) }
}

// isEventStream reports whether a response is read ahead for its first
// token (R26): a 2xx text/event-stream, as the server encoded it. A body
// the caller asked compressed itself (Content-Encoding set) is not read: its
// bytes are not events. A header check, and nothing else, for any other
// response.
func isEventStream(resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false
	}
	const mt = "text/event-stream"
	v := strings.TrimLeft(resp.Header.Get("Content-Type"), " \t")
	if len(v) < len(mt) || !strings.EqualFold(v[:len(mt)], mt) {
		return false
	}
	if len(v) > len(mt) && v[len(mt)] != ';' && v[len(mt)] != ' ' && v[len(mt)] != '\t' {
		return false
	}
	ce := resp.Header.Get("Content-Encoding")
	return ce == "" || strings.EqualFold(strings.TrimSpace(ce), "identity")
}

// readStream reads the try's event stream ahead to its first token (R26),
// and makes of the try what the stream's start says: an error event first
// fails it as the status the error stands for (its class, and what readAsk
// and the Cooldown read of it); a stream cut for want of a first token, or
// whose read failed or was ended by the caller's context, is a try that
// failed with that error (its response closed); anything else is handed
// over. Every response it keeps has its body whole again (streamBody).
func (c *call) readStream() {
	r := &c.cur
	if !isEventStream(r.resp) {
		return
	}
	left := maxDuration
	if d := c.cfg.firstToken; d > 0 {
		left = d - c.cfg.clock.Since(r.started)
	}
	body := &streamBody{body: r.resp.Body}
	v, why, err := c.readFirstToken(body, left)
	switch {
	case why == cutNone && (v.Kind != signal.StreamMore || err == nil):
		r.resp.Body = body
		switch v.Kind {
		case signal.StreamToken:
			r.firstToken = max(c.cfg.clock.Since(r.started), 0)
		case signal.StreamError:
			r.stream = v
			r.class = streamClass(v.Status)
		}
		return
	case c.ctx.Err() != nil:
		err = c.ctx.Err() // the caller's own end, as in a try (R9)
	case why == cutTimer:
		err = &firstTokenError{d: c.cfg.firstToken}
	}
	closeBody(r.resp.Body)
	r.resp, r.err = nil, err
	r.class = c.cfg.classify(c.req, nil, err)
}

// readFirstToken reads b's body into b until a verdict of the stream
// reader, the body's end or error, or a cut (why): the first token's time
// left running out, or the caller's context ending. It reads on the call's
// goroutine; a cut ends the read by closing the body (streamCut), and
// nothing it armed outlives it. err is what ended the read, kept in b to
// be returned after the bytes read ahead.
func (c *call) readFirstToken(b *streamBody, left time.Duration) (v signal.StreamVerdict, why cutReason, err error) {
	if left <= 0 {
		return v, cutTimer, nil // no token came in time: it is over before any read
	}
	cut := streamCuts.Get().(*streamCut)
	cut.body, cut.from = b.body, c.sentTry()
	defer cut.release() // after a Read that panicked too
	if left < maxDuration {
		cut.wg.Add(1)
		cut.timer = c.cfg.clock.AfterFunc(left, cut.onTimer)
	}
	// net/http ends a body's read itself when the request's context ends
	// (the caller's, or a try's made from it): a watch is for other bodies.
	if c.ctx.Done() != nil && !netHTTPBody(unwrapTry(b.body)) {
		cut.wg.Add(1)
		cut.stopWatch = context.AfterFunc(c.ctx, cut.onCaller)
	}
	v, err = b.readAhead()
	cut.stop()
	return v, cut.why.Load(), err
}

// readAhead reads the body into ahead, with a Stream reader, until its
// verdict, the body's end (the verdict StreamEnded) or an error (StreamMore
// and the error), or reads that keep bringing nothing (StreamMore and nil:
// handed over). b.err keeps what ended the read.
func (b *streamBody) readAhead() (signal.StreamVerdict, error) {
	var s signal.Stream
	buf := b.first[:0]
	for empty := 0; ; {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(len(buf), signal.MaxStreamAhead-len(buf)))
		}
		free := buf[len(buf):min(cap(buf), signal.MaxStreamAhead)]
		n, err := b.body.Read(free)
		if n < 0 || n > len(free) {
			n, err = 0, errBadReadCount
		}
		buf = buf[:len(buf)+n]
		b.ahead, b.err = buf, err
		v := s.Feed(buf)
		switch {
		case v.Kind != signal.StreamMore:
			return v, err
		case errors.Is(err, io.EOF):
			return s.End(), err
		case err != nil:
			return v, err
		case n == 0:
			if empty++; empty >= maxEmptyReads {
				return v, nil
			}
		}
	}
}

var errBadReadCount = errors.New("retryhttp: response body Read returned an impossible count")

// streamClass is the class of a try whose stream failed with an error
// event that stands for status (R26, R2): 429 Throttled; 408 and every 5xx
// but 501 and 505 Transient; anything else, an unknown status (0)
// included, Permanent. readAsk then makes an exhausted quota and Google's
// DEADLINE_EXCEEDED Permanent, as for a response.
func streamClass(status int) Class {
	switch {
	case status == http.StatusTooManyRequests:
		return Throttled
	case status == http.StatusRequestTimeout,
		status >= 500 && status <= 599 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported:
		return Transient
	}
	return Permanent
}

// tellCooldownOfStream tells the Cooldown of the try (tellCooldown), with
// a stream's error event heard as the status it stands for (R26): an
// overloaded stream is a failure to the circuit, a rate-limit error holds
// and paces its key as a 429 would (R17, R23), and neither is a success
// that lets a learned rate grow. The response handed on is unchanged.
func (c *call) tellCooldownOfStream() {
	r := &c.cur
	if r.stream.Kind != signal.StreamError || r.stream.Status == 0 || c.cfg.cooldown == nil {
		c.tellCooldown()
		return
	}
	resp := r.resp
	view := *resp
	view.StatusCode = r.stream.Status
	r.resp = &view
	defer func() { r.resp = resp }()
	c.tellCooldown()
}

// streamError is the type of the error event that failed the try (R26),
// for the Attempt and the log; "" when none did.
func (r *tryState) streamError() string {
	if r.stream.Kind != signal.StreamError {
		return ""
	}
	return r.stream.Type
}

// firstTokenError is a try whose stream had no first token in time
// (WithStreamRetry). It is a net.Error with Timeout() true, as a try
// timeout's (R13); it does not match context.DeadlineExceeded, which would
// say the caller's own deadline had passed.
type firstTokenError struct{ d time.Duration }

func (e *firstTokenError) Error() string {
	return "retryhttp: no first token within " + e.d.String() + " of the try's send"
}
func (e *firstTokenError) Timeout() bool   { return true }
func (e *firstTokenError) Temporary() bool { return true }

// streamBody is an event stream's body once read ahead (R26): the bytes
// read ahead, then the rest as the body gives them, so the caller reads
// exactly what the provider sent. Close may be called during a Read (a
// drain abandoned, R10): it closes the body under it, as the body allows.
type streamBody struct {
	ahead  []byte
	err    error // what ended the read ahead, returned after ahead; nil: the rest comes from body
	body   io.ReadCloser
	closed atomic.Bool
	first  [streamFirstRead]byte // ahead's first bytes: one allocation for a healthy opening
}

// streamFirstRead is what the first read ahead of a stream may read: more
// than an Anthropic, OpenAI Chat or Gemini opening and its first token
// (about 700 bytes), and no more, since every byte of it is zeroed and
// copied once more (a 4 KiB one cost a healthy stream 2.4 µs over a stub,
// this one 1.0 µs). A longer opening (OpenAI Responses', a few KiB) grows
// the buffer, doubling, up to MaxStreamAhead.
const streamFirstRead = 1 << 10

func (b *streamBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errReadAfterClose
	}
	if len(b.ahead) > 0 {
		n := copy(p, b.ahead)
		b.ahead = b.ahead[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.body.Read(p)
}

func (b *streamBody) Close() error {
	b.closed.Store(true)
	return b.body.Close()
}

// unwrapTry returns the body a try's own context wraps (cancelOnClose),
// else body.
func unwrapTry(body io.ReadCloser) io.ReadCloser {
	switch b := body.(type) {
	case *cancelReadCloser:
		return b.ReadCloser
	case *cancelReadWriteCloser:
		return b.ReadWriteCloser
	}
	return body
}

// cutReason is why a read ahead was cut.
type cutReason = uint32

const (
	cutNone   cutReason = iota
	cutTimer            // no first token in time
	cutCaller           // the caller's context ended
)

// streamCut ends a read ahead of a stream from outside it, as send ends a
// try at its timeout: at the first token's time, by a function on the
// transport's clock, and at the end of the caller's context, by
// context.AfterFunc. Either ends the read by ending the try's own context
// when it has one, else through the base's CancelRequest, and by closing
// the body (net/http's and the kit's allow a Close during a Read). stop
// stops both and waits for one that has started, so that nothing outlives
// the try. streamCuts keeps them, with their functions, for the next
// stream: a healthy stream allocates no closure for them.
type streamCut struct {
	body      io.ReadCloser
	from      sentTry
	why       atomic.Uint32
	wg        sync.WaitGroup // the functions armed and not stopped
	timer     *clock.Timer
	stopWatch func() bool
	onTimer   func()
	onCaller  func()
}

var streamCuts = sync.Pool{New: func() any {
	s := &streamCut{}
	s.onTimer = func() { s.cut(cutTimer) }
	s.onCaller = func() { s.cut(cutCaller) }
	return s
}}

func (s *streamCut) cut(why cutReason) {
	defer s.wg.Done()
	if !s.why.CompareAndSwap(cutNone, why) {
		return
	}
	if cancel := tryCancel(s.body); cancel != nil {
		cancel(errFirstTokenCut)
	} else if c, ok := s.from.base.(requestCanceler); ok && s.from.req != nil {
		c.CancelRequest(s.from.req)
	}
	closeRecovered(s.body)
}

var errFirstTokenCut = errors.New("retryhttp: stream cut before its first token")

// stop stops what was armed, and waits for a function that had started.
func (s *streamCut) stop() {
	if s.timer != nil && s.timer.Stop() {
		s.wg.Done()
	}
	if s.stopWatch != nil && s.stopWatch() {
		s.wg.Done()
	}
	s.wg.Wait()
}

// release stops s (again: stop is idempotent) and makes it ready for the
// next stream. Both functions are then stopped or done: none runs again
// on it.
func (s *streamCut) release() {
	s.stop()
	s.body, s.from, s.timer, s.stopWatch = nil, sentTry{}, nil, nil
	s.why.Store(cutNone)
	streamCuts.Put(s)
}
