package retryhttp

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// What the Transport reads of a request's body beyond sending it (R17, R23:
// its output cap for an estimate, its model for KeyByModel) it reads from a
// GetBody copy, never from req.Body, at most its first 64 KiB, bounded in
// real time, and never panicking.

// readCopy reads the first maxDrain bytes of a GetBody copy of req's body,
// hands them to f (which must not keep them: the buffer goes back to a
// pool), and returns how many it read; ok is false, and f is not called,
// when there is no copy (no GetBody, or it failed or panicked) or its read
// was given up. A Read that panics, or returns a count that cannot be, ends
// the read: what came before counts. The read runs on a goroutine of its
// own, bounded in real time (bodyTimeout) and by req's context: a copy
// whose Read blocked held a call with a 200 ms deadline past 3 s (issue
// 29). A read given up is left to that goroutine, which closes the copy
// once its Read returns (never under it: io.ReadCloser does not promise
// that is safe) and only then gives its buffer back to the pool.
func readCopy(req *http.Request, f func(b []byte)) (n int64, ok bool) {
	b := getBody(req)
	if b == nil {
		return 0, false
	}
	r := &copyRead{body: b, buf: copyBufs.Get().(*[]byte), done: make(chan struct{})}
	go r.run()
	timer := time.NewTimer(bodyTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
	case <-req.Context().Done():
	}
	if r.state.CompareAndSwap(copyReading, copyGivenUp) {
		return 0, false // the goroutine closes the copy
	}
	<-r.done
	f((*r.buf)[:r.n])
	closeRecovered(r.body)
	copyBufs.Put(r.buf)
	return int64(r.n), true
}

// getBody returns a GetBody copy of req's body; nil without GetBody, or
// when it fails or panics.
func getBody(req *http.Request) (b io.ReadCloser) {
	defer func() {
		if recover() != nil {
			b = nil
		}
	}()
	if req.GetBody == nil {
		return nil
	}
	if b, err := req.GetBody(); err == nil {
		return b
	}
	return nil
}

// copyRead is the read of a GetBody copy (readCopy).
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
	copyBufs.Put(r.buf)
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

var copyBufs = sync.Pool{New: func() any { b := make([]byte, maxDrain); return &b }}
