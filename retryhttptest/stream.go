package retryhttptest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// A Chunk is a part of a body that comes in parts (Stream): its bytes,
// which come After the part before them (the first part: after the
// headers). A Read of such a body returns the bytes of one part at most,
// so that the parts are the reads a client makes. The zero Chunk is an
// empty part with no wait.
type Chunk struct {
	After time.Duration // the wait before Data comes; 0 or less: at once
	Data  string
}

// Stream returns a 200 reply with Content-Type text/event-stream whose body
// comes in parts, as a provider streams its server-sent events: the body
// is the chunks' Data, each read after its chunk's After (a stall), then
// the end (EOF; Reply.Cut makes it an error, Reply.Open makes it never
// come):
//
//	retryhttptest.Stream(
//		retryhttptest.Chunk{Data: retryhttptest.Event("message_start", `{"type":"message_start"}`)},
//		retryhttptest.Chunk{After: 30 * time.Second, Data: retryhttptest.Event("content_block_delta", delta)},
//	)
//
// A wait runs on the Script's clock. On a *Clock, the Read that reaches
// the chunk moves the clock on by After itself, running the functions due
// on the way, each at its instant, as a Hang reply does (the transport's
// timers for a first token): a stall takes no real time, and a timer that
// ends the try's context or closes the body during it ends the Read there,
// with no goroutine. On any other clock, and with none, the wait is real
// time (bubble time in a testing/synctest bubble). Either way a Read
// returns, with an error, as soon as the request's context ends (its
// cause, as net/http) or the body is closed, even from within a function
// the clock runs: closing the body while a Read waits is safe, as for
// net/http's bodies.
//
// Its ContentLength is -1. Other statuses and headers: set them on the
// returned Reply.
func Stream(chunks ...Chunk) Reply {
	r := Status(http.StatusOK, "Content-Type", "text/event-stream")
	r.chunks = append(make([]Chunk, 0, len(chunks)), chunks...) // never nil: a stream, even of no chunk
	return r
}

// Open returns r with a body that, after its bytes, never ends: a Read
// waits until the request's context ends or the body is closed, as for a
// stream whose server goes quiet. On a Script whose clock is a *Clock,
// the Read first moves the clock on to each function due on it, as a Hang
// reply does. Open makes Cut's error never come.
func (r Reply) Open() Reply {
	r.open = true
	return r
}

// Split cuts data into chunks of n bytes (the last may be shorter), with no
// wait between them: Stream(Split(event, 1)...) sends an event a byte a
// Read. An n below 1 counts as 1.
func Split(data string, n int) []Chunk {
	n = max(n, 1)
	chunks := make([]Chunk, 0, (len(data)+n-1)/n)
	for len(data) > 0 {
		k := min(n, len(data))
		chunks = append(chunks, Chunk{Data: data[:k]})
		data = data[k:]
	}
	return chunks
}

// Event formats one server-sent event: its event line (none when name is
// ""), a data line per line of data, and the blank line that ends it.
//
//	retryhttptest.Event("error", `{"type":"error","error":{"type":"overloaded_error"}}`)
func Event(name, data string) string {
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	for line := range strings.SplitSeq(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

// errBodyClosed is what a Read of a stream's body returns once the body is
// closed, as net/http's "read on closed response body".
var errBodyClosed = errors.New("retryhttptest: read on closed response body")

// streamBody is the body of a reply with chunks or Open: its Read waits
// each chunk's After, on the Script's clock.
type streamBody struct {
	ctx    context.Context
	clk    clock.Clock
	chunks []Chunk
	end    error // after the chunks: io.EOF, Cut's error, or nil for Open

	i, off int  // the chunk being read, and how much of it was
	waited bool // chunk i's After has passed

	once   sync.Once
	closed chan struct{}
}

func newStreamBody(r Reply, req *http.Request, clk clock.Clock) *streamBody {
	b := &streamBody{ctx: req.Context(), clk: clk, end: io.EOF, closed: make(chan struct{})}
	if r.Body != "" {
		b.chunks = append(b.chunks, Chunk{Data: r.Body})
	}
	b.chunks = append(b.chunks, r.chunks...)
	switch {
	case r.open:
		b.end = nil
	case r.cut != nil:
		b.end = r.cut
	}
	return b
}

// Read returns bytes of one chunk, after its wait.
func (b *streamBody) Read(p []byte) (int, error) {
	if err := b.stopped(); err != nil {
		return 0, err
	}
	for b.i < len(b.chunks) {
		c := b.chunks[b.i]
		if !b.waited {
			if err := b.wait(c.After); err != nil {
				return 0, err
			}
			b.waited = true
		}
		if b.off < len(c.Data) {
			n := copy(p, c.Data[b.off:])
			b.off += n
			return n, nil
		}
		b.i, b.off, b.waited = b.i+1, 0, false
	}
	if b.end != nil {
		return 0, b.end
	}
	return 0, b.wait(forever)
}

// Close ends the body, and a Read waiting in it. It may be called at any
// time, from any goroutine, more than once.
func (b *streamBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// stopped is the error a Read returns once the body is closed or the
// request's context has ended; nil before.
func (b *streamBody) stopped() error {
	select {
	case <-b.closed:
		return errBodyClosed
	default:
	}
	if b.ctx.Err() != nil {
		return context.Cause(b.ctx)
	}
	return nil
}

// wait waits d (forever: until stopped), on the Script's clock when it is
// a *Clock, else in real time, and returns early, with the error, once the
// body is stopped.
func (b *streamBody) wait(d time.Duration) error {
	if d <= 0 {
		return b.stopped()
	}
	if c, ok := b.clk.(*Clock); ok {
		if d == forever {
			for b.stopped() == nil && c.runNext() { //nolint:revive // each turn runs the next function due
			}
		} else {
			for end := c.Now().Add(d); b.stopped() == nil && c.advance(end, true); { //nolint:revive // each turn advances the clock
			}
			return b.stopped() // the clock is at the end of the wait, or where a function stopped it
		}
	}
	if err := b.stopped(); err != nil {
		return err
	}
	var timeout <-chan time.Time
	if d != forever {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return b.stopped()
	case <-b.closed:
		return errBodyClosed
	case <-b.ctx.Done():
		return context.Cause(b.ctx)
	}
}
