package retryhttptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// A Reply is what a Script answers to one try: a response (Status, Header,
// Body) or a transport error (Err, which wins when both are set). The zero
// Reply is a 200 with an empty body. Hang, Reply.Cut, Stream, Reply.Open and
// Reply.Asks make the replies a literal cannot: no answer at all, a stream
// that breaks mid-body, a body that comes in parts and stalls, one that
// never ends, and the headers by which a server asks for a wait. A Reply
// may be used in many Scripts and served many times; each response is made
// anew.
type Reply struct {
	Status int         // 200 when 0
	Header http.Header // copied into every response made from the Reply; nil is empty
	Body   string
	Err    error // the try fails with this transport error; when set, Status, Header and Body are not used

	cut     error    // after Body, reads fail with it (Cut)
	hang    bool     // no answer until the try's context ends (Hang)
	signals []signal // headers written when the reply is served (Asks)
	chunks  []Chunk  // after Body, the body's parts, each after its wait (Stream)
	open    bool     // after its bytes, the body never ends (Open)
}

// Status returns a reply with the status code and the headers given as
// name, value pairs: Status(429, "Retry-After", "2"). It panics when a name
// has no value.
func Status(code int, headerKV ...string) Reply {
	if len(headerKV)%2 != 0 {
		panic("retryhttptest: Status: header " + strconv.Quote(headerKV[len(headerKV)-1]) + " has no value")
	}
	r := Reply{Status: code}
	if len(headerKV) > 0 {
		r.Header = make(http.Header, len(headerKV)/2)
		for i := 0; i < len(headerKV); i += 2 {
			r.Header.Add(headerKV[i], headerKV[i+1])
		}
	}
	return r
}

// Fail returns a reply that fails the try with the transport error err, as a
// reset connection or a refused dial would: Fail(syscall.ECONNRESET).
func Fail(err error) Reply {
	return Reply{Err: err}
}

// Hang returns a reply that never comes: the try blocks until its context
// ends, then fails with the context's cause (context.Cause), as net/http
// does. It tests
// retryhttp.WithTryTimeout and the caller's own deadlines.
//
// On a Script whose clock (WithClock) is a *Clock, the try moves that clock
// on itself, from one AfterFunc to the next, until its context ends: the
// transport's per-try timeout fires at exactly its instant, with no
// goroutine and no real wait. When nothing on the clock can end the context,
// or without a *Clock, the try blocks until the context ends in real time
// (or bubble time, in a testing/synctest bubble). A context that can never
// end (no Done channel) makes the try panic rather than hang the test.
func Hang() Reply {
	return Reply{hang: true}
}

// Cut returns r with a body that yields r.Body and then fails with err, as a
// stream does when the connection drops mid-way (io.ErrUnexpectedEOF when err
// is nil). The response's ContentLength is -1, as for a stream.
//
//	retryhttptest.Reply{Body: "data: {\"delta\":\"Hel"}.Cut(io.ErrUnexpectedEOF)
func (r Reply) Cut(err error) Reply {
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	r.cut = err
	return r
}

// A Request is what a Script received for one try.
type Request struct {
	Method string
	URL    string      // as sent, query and userinfo included
	Header http.Header // a copy
	Body   []byte      // read whole, and closed; nil when there was none
	At     time.Time   // on the Script's clock, else time.Now
}

// Script is an http.RoundTripper that answers tries from a list of replies
// and records every request, to stand in for a provider under the transport:
//
//	script := retryhttptest.NewScript(retryhttptest.Status(503), retryhttptest.Status(200))
//	client := &http.Client{Transport: retryhttp.New(script)}
//
// The n-th try, counted across all goroutines, gets the n-th reply; past the
// end of the list it gets the last reply again; a Script with no replies
// answers every try with the zero Reply (200). A request whose context has
// already ended is not sent, as in net/http: it fails with the context's
// cause, uses up no reply and is not recorded. Each try reads the request's
// body whole and closes it; a body that fails to read fails the try with
// that error (wrapped), as net/http would, uses up its reply, and the
// Request records what was read. Every response is new, with its own copy of
// the reply's headers, and its Request field set.
//
// A Script is safe for concurrent use by multiple goroutines.
type Script struct {
	mu      sync.Mutex
	replies []Reply
	tries   int
	reqs    []Request
	clk     clock.Clock
}

// NewScript returns a Script that answers tries with replies, in order.
func NewScript(replies ...Reply) *Script {
	return &Script{replies: slices.Clone(replies)}
}

// WithClock makes the Script stamp Request.At, and compute the time-relative
// headers of Reply.Asks, on c, and lets Hang replies move c when it is a
// *Clock. A nil c means time.Now. It returns s.
func (s *Script) WithClock(c clock.Clock) *Script {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clk = c
	return s
}

// Requests returns every request received so far, in order.
func (s *Script) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Len returns how many requests the Script received: 0 means nothing was
// sent.
func (s *Script) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// RoundTrip records req and answers it with the next reply.
func (s *Script) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("retryhttptest: nil Request")
	}
	if ctx := req.Context(); ctx.Err() != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, context.Cause(ctx) // not sent, as in net/http
	}
	body, bodyErr := readBody(req)

	s.mu.Lock()
	clk := s.clk
	at := time.Now()
	if clk != nil {
		at = clk.Now()
	}
	var r Reply
	switch {
	case s.tries < len(s.replies):
		r = s.replies[s.tries]
	case len(s.replies) > 0:
		r = s.replies[len(s.replies)-1]
	}
	s.tries++
	url := ""
	if req.URL != nil {
		url = req.URL.String()
	}
	s.reqs = append(s.reqs, Request{Method: req.Method, URL: url, Header: req.Header.Clone(), Body: body, At: at})
	s.mu.Unlock()

	switch {
	case bodyErr != nil:
		return nil, fmt.Errorf("retryhttptest: reading the request body: %w", bodyErr)
	case r.hang:
		return nil, hang(req.Context(), clk)
	case r.Err != nil:
		return nil, r.Err
	}
	return r.response(req, at, clk), nil
}

// readBody reads req's body whole and closes it, as a server would.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer func() { _ = req.Body.Close() }()
	if req.Body == http.NoBody {
		return nil, nil
	}
	return io.ReadAll(req.Body)
}

// hang blocks until ctx ends, moving clk on when it is a *Clock so that the
// functions due on it (the transport's try timeout) run without a goroutine.
func hang(ctx context.Context, clk clock.Clock) error {
	if c, ok := clk.(*Clock); ok {
		for ctx.Err() == nil {
			if !c.runNext() {
				break
			}
		}
	}
	if ctx.Err() == nil && ctx.Done() == nil {
		panic("retryhttptest: a Hang reply on a context that never ends: use retryhttp.WithTryTimeout or a context that does")
	}
	<-ctx.Done()
	return context.Cause(ctx)
}

func (r Reply) response(req *http.Request, at time.Time, clk clock.Clock) *http.Response {
	code := r.Status
	if code == 0 {
		code = http.StatusOK
	}
	h := r.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	for _, sig := range r.signals {
		sig.write(h, at)
	}
	resp := &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: int64(len(r.Body)),
		Request:       req,
	}
	switch {
	case r.chunks != nil || r.open:
		resp.Body = newStreamBody(r, req, clk)
		resp.ContentLength = -1
	case r.cut != nil:
		resp.Body = io.NopCloser(&cutReader{r: strings.NewReader(r.Body), err: r.cut})
		resp.ContentLength = -1
	default:
		resp.Body = io.NopCloser(strings.NewReader(r.Body))
	}
	return resp
}

// cutReader yields what r holds, then fails with err.
type cutReader struct {
	r   *strings.Reader
	err error
}

func (b *cutReader) Read(p []byte) (int, error) {
	if b.r.Len() == 0 {
		return 0, b.err
	}
	return b.r.Read(p)
}
