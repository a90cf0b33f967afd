package bench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
)

// A server is a loopback httptest server that counts the requests and the
// new TCP connections it sees.
type server struct {
	*httptest.Server
	requests atomic.Int64
	conns    atomic.Int64
}

func newServer(h func(s *server, w http.ResponseWriter, r *http.Request)) *server {
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(s, w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	return s
}

// BaseTransport is the base every library sends through in the loopback
// scenarios: net/http's default transport, without a proxy, that keeps up
// to idle connections per host.
func BaseTransport(idle int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConnsPerHost = max(idle, 2)
	return t
}

// CompletionBody is what the happy-path server answers: a small chat
// completion, as an LLM API sends it.
var CompletionBody = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1764500000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)

// NewCompletionServer starts a loopback server that answers every request
// with 200 and CompletionBody.
func NewCompletionServer() *httptest.Server {
	return newServer(func(_ *server, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(CompletionBody)))
		w.Write(CompletionBody)
	}).Server
}
