package retryhttp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
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
// bound and walk away from a body that stalls. Handed back to the caller, it
// is the body whole (R19): the bytes read ahead as they come, then the rest.
//
// A read it walks away from is ended (R10), and Close never waits for it.
// A body's Close may: net/http's reader of a body it gunzips for the caller
// (resp.Uncompressed, HTTP/1 and HTTP/2 alike) holds a lock while it reads
// the gzip header, and Close takes it (a Close on the transport's
// goroutine waited for the caller's deadline). So Close, while the read
// still goes on, ends it thus, and returns:
//
//   - on a try that has a context of its own (every retry, and every try
//     under WithTryTimeout: its body is wrapped by cancelOnClose), Close
//     cancels that context, which ends a net/http body's Read at once
//     (HTTP/1 closes the connection, HTTP/2 resets the stream);
//   - on the first try without WithTryTimeout, sent with the caller's
//     request and context (R16 leaves it no context of its own), Close
//     calls the base's CancelRequest when it has one (*http.Transport: over
//     HTTP/1 that closes the connection, whatever the body), and closes a
//     body of net/http's own under the Read, on a goroutine of its own.
//     net/http guards what its bodies' Read and Close share, so that is
//     safe, and it ends the Read at once, but for a gzip reader still
//     reading its header, whose Close waits for that read. io.ReadCloser
//     does not promise that in general: no other body is closed under its
//     Read.
//
// The goroutine that read closes the body once its Read returns, unless
// Close gave that to a goroutine of its own. Left to the server, on a first
// try without WithTryTimeout (RULES.md R10): a gunzipped body stalled in its
// gzip header, over HTTP/2 or through a base with no CancelRequest, and a
// body not net/http's through a base with no CancelRequest.
//
// A Read that panics is recovered on the goroutine, where a panic would take
// the process down: the read ends with errBodyReadPanicked, which does not
// hold the panic's value (it may hold a secret), and the goroutine closes
// the body. A handed-back body's Read returns that error after the bytes
// that came before it.
type readAhead struct {
	body   io.ReadCloser
	keep   bool                    // keep the bytes (to parse them, and to hand them back)
	cancel context.CancelCauseFunc // ends the try's own context; nil when it has none (the first try)
	from   sentTry                 // the try the body came from, to end a read of a first try
	done   chan struct{}           // closed when the read ahead has ended

	mu         sync.Mutex
	more       *sync.Cond // the read ahead got bytes, or ended, or Close was called
	buf        []byte     // what was read, when keep
	off        int        // of buf, handed to the caller
	err        error      // what ended the read: io.EOF at the end of the body, nil at maxDrain
	closed     bool       // Close was called
	bodyClosed bool       // the body was closed, or is being closed, by a goroutine of the read ahead
}

// sentTry is the try a body came from: the request sent, and the base it
// was sent to. A first try's has no context of the transport's own, and an
// abandoned read of its body is ended through them (readAhead).
type sentTry struct {
	req  *http.Request
	base http.RoundTripper
}

// requestCanceler is the way before contexts to end a request in flight,
// which *http.Transport keeps, deprecated: over HTTP/1 it closes the
// request's connection, a Read of its body included, whatever the body
// (net/http's client looks for it the same way). It does nothing over
// HTTP/2, and nothing once the body was read to its end.
type requestCanceler interface{ CancelRequest(*http.Request) }

var (
	errBodyReadPanicked = errors.New("retryhttp: response body Read panicked")
	errReadAfterClose   = errors.New("retryhttp: read on closed response body")
)

func startReadAhead(body io.ReadCloser, keep bool, from sentTry) *readAhead {
	r := &readAhead{body: body, keep: keep, cancel: tryCancel(body), from: from, done: make(chan struct{})}
	r.more = sync.NewCond(&r.mu)
	go r.run()
	return r
}

// tryCancel returns what ends the context of the try that body came from,
// when the transport gave that try a context of its own (send wraps such a
// body with cancelOnClose); nil otherwise.
func tryCancel(body io.ReadCloser) context.CancelCauseFunc {
	switch b := body.(type) {
	case *cancelReadCloser:
		return b.cancel
	case *cancelReadWriteCloser:
		return b.cancel
	case *streamBody: // read ahead to its first token (R26)
		return tryCancel(b.body)
	}
	return nil
}

// netHTTPBody reports whether body is one of net/http's own response bodies
// (HTTP/1, HTTP/2, and their gzip readers), whose Close is safe under a
// Read: each guards what the two share. Pinned by TestNetHTTPBodies against
// the net/http in use.
func netHTTPBody(body io.ReadCloser) bool {
	if b, ok := body.(*streamBody); ok { // read ahead to its first token (R26): its Close is the body's
		body = b.body
	}
	t := reflect.TypeOf(body)
	if t == nil {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == "net/http"
}

func (r *readAhead) run() {
	err := r.read()
	r.mu.Lock()
	r.err = err
	closeIt := (r.closed || errors.Is(err, errBodyReadPanicked)) && !r.bodyClosed
	r.bodyClosed = r.bodyClosed || closeIt
	close(r.done)
	r.more.Broadcast()
	r.mu.Unlock()
	if closeIt {
		closeRecovered(r.body) // the Read has returned: no Close under it
	}
}

// read reads the body ahead, and turns a panic in its Read into
// errBodyReadPanicked.
func (r *readAhead) read() (err error) {
	defer func() {
		if recover() != nil {
			err = errBodyReadPanicked // never the value: it may hold a secret
		}
	}()
	if !r.keep {
		_, err = io.CopyN(io.Discard, r.body, maxDrain)
		return err
	}
	chunk := make([]byte, 4<<10)
	for n := 0; n < maxDrain && err == nil; {
		var k int
		k, err = r.body.Read(chunk[:min(len(chunk), maxDrain-n)])
		got := chunk[:k] // out of the lock: a bad count panics here, not under it
		n += k
		r.mu.Lock()
		r.buf = append(r.buf, got...)
		r.more.Broadcast()
		r.mu.Unlock()
	}
	return err
}

// closeRecovered closes a body on the read ahead's goroutine, where a panic
// (from a body whose Read panicked already, say) would take the process
// down.
func closeRecovered(body io.Closer) {
	defer func() { _ = recover() }()
	_ = body.Close()
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

// Close closes the body, or, while the read ahead still reads it, ends
// that read (see readAhead), and has the body closed when it returns. It
// never blocks on the read.
func (r *readAhead) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	running := !r.finished()
	closeNow := !running && !r.bodyClosed
	closeUnder := running && r.cancel == nil && netHTTPBody(r.body)
	r.bodyClosed = r.bodyClosed || closeNow || closeUnder
	r.more.Broadcast() // a Read waiting for bytes returns
	r.mu.Unlock()
	switch {
	case running && r.cancel != nil:
		r.cancel(nil)
	case running:
		if c, ok := r.from.base.(requestCanceler); ok && r.from.req != nil {
			c.CancelRequest(r.from.req)
		}
		if closeUnder {
			go r.closeUnderRead()
		}
	case closeNow:
		return r.body.Close()
	}
	return nil
}

// closeUnderRead closes a first try's net/http body while the read ahead
// still reads it, which ends that read (see readAhead). It runs on a
// goroutine of its own: a gzip reader's Close waits for a read of its
// header, and Close must never wait (R10).
func (r *readAhead) closeUnderRead() { closeRecovered(r.body) }

// Read hands back the body: the bytes read ahead, as they come, then the
// rest, as the caller would have read them without the transport. After
// Close it returns an error and never touches the body, which the read
// ahead's goroutine may be closing.
func (r *readAhead) Read(p []byte) (int, error) {
	r.mu.Lock()
	for r.off == len(r.buf) && !r.finished() && !r.closed {
		r.more.Wait()
	}
	if r.closed {
		r.mu.Unlock()
		return 0, errReadAfterClose
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

// errorBody returns a failed body read ahead as ParseErrorBody is to read
// it (R19). A caller that sets Accept-Encoding itself gets the body as the
// server encoded it (net/http decompresses only what it asked for itself),
// so a provider's JSON error may come in gzip: that is decompressed here,
// at most maxDrain bytes of it, so that a gzip bomb costs no more than a
// plain body, and a stream cut short gives what came of it. Any other
// encoding (deflate, br, a list of codings) is left unparsed: nil. The
// caller still gets the raw bytes: this is only what the transport reads.
func errorBody(h http.Header, raw []byte) []byte {
	codings := h.Values("Content-Encoding")
	if len(codings) == 0 {
		return raw
	}
	if len(codings) > 1 {
		return nil
	}
	switch c := strings.TrimSpace(codings[0]); {
	case c == "" || strings.EqualFold(c, "identity"):
		return raw
	case strings.EqualFold(c, "gzip") || strings.EqualFold(c, "x-gzip"): // RFC 9110: x-gzip is gzip
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil
		}
		b, _ := io.ReadAll(io.LimitReader(zr, maxDrain)) // what came before an error is still worth reading
		return b
	}
	return nil
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
