package retryhttp

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxDrain bounds how much of a failed response's body is read (R10, R19):
// enough for a provider's error page, so the connection is reused, and for
// its JSON error, little enough that an endless body cannot hold the call.
const maxDrain = 64 << 10

// bodyTimeout bounds, in real time, how long the transport waits on a body
// it reads for itself, where no wait follows: a body that stalls costs at
// most this (R10 allows 50 ms; the rest is margin). Where a wait follows,
// the read overlaps the wait and is abandoned when the wait ends.
//
// This is real time, not the injected clock: what it bounds is a real
// connection, and a test's mock clock must not make a stalled body hang.
const bodyTimeout = 40 * time.Millisecond

// reuseGrace is the least a drain gets before a retry, even when the wait
// before it is shorter: enough for an error page already on its way.
const reuseGrace = time.Millisecond

// readAhead reads the start of a response body (at most maxDrain bytes) on
// a goroutine of its own, so that the transport can wait for it with a
// bound and walk away from a body that stalls: closing the body ends the
// read. Handed back to the caller, it is the body whole (R19): the bytes
// read ahead as they come, then the rest.
type readAhead struct {
	body io.ReadCloser
	keep bool          // keep the bytes (to parse them, and to hand them back)
	done chan struct{} // closed when the read ahead has ended

	mu   sync.Mutex
	more *sync.Cond // the read ahead got bytes, or ended
	buf  []byte     // what was read, when keep
	off  int        // of buf, handed to the caller
	err  error      // what ended the read: io.EOF at the end of the body, nil at maxDrain
}

func startReadAhead(body io.ReadCloser, keep bool) *readAhead {
	r := &readAhead{body: body, keep: keep, done: make(chan struct{})}
	r.more = sync.NewCond(&r.mu)
	go r.run()
	return r
}

func (r *readAhead) run() {
	var err error
	if r.keep {
		chunk := make([]byte, 4<<10)
		for n := 0; n < maxDrain && err == nil; {
			var k int
			k, err = r.body.Read(chunk[:min(len(chunk), maxDrain-n)])
			n += k
			r.mu.Lock()
			r.buf = append(r.buf, chunk[:k]...)
			r.more.Broadcast()
			r.mu.Unlock()
		}
	} else {
		_, err = io.CopyN(io.Discard, r.body, maxDrain)
	}
	r.mu.Lock()
	r.err = err
	close(r.done)
	r.more.Broadcast()
	r.mu.Unlock()
}

// wait waits until the read ahead has ended, d has passed in real time, or
// ctx has ended.
func (r *readAhead) wait(ctx context.Context, d time.Duration) {
	if d <= 0 || r.finished() {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// finished reports whether the read ahead has ended, without waiting.
func (r *readAhead) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// bytes returns what was read ahead, or nil while the read goes on.
func (r *readAhead) bytes() []byte {
	if !r.finished() {
		return nil
	}
	return r.buf // the goroutine is done with it
}

// Close closes the body, which ends a read that is still going on.
func (r *readAhead) Close() error { return r.body.Close() }

// Read hands back the body: the bytes read ahead, as they come, then the
// rest, as the caller would have read them without the transport.
func (r *readAhead) Read(p []byte) (int, error) {
	r.mu.Lock()
	for r.off == len(r.buf) && !r.finished() {
		r.more.Wait()
	}
	if r.off < len(r.buf) {
		n := copy(p, r.buf[r.off:])
		r.off += n
		r.mu.Unlock()
		return n, nil
	}
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return r.body.Read(p) // the read ahead stopped at maxDrain: the rest comes straight
}

// isJSON reports whether a response says its body is JSON (R19):
// application/json, or any +json type, with parameters.
func isJSON(h http.Header) bool {
	v := h.Get("Content-Type")
	if v == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}
