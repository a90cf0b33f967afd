package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
)

// apiKey is what the fake provider expects in Authorization: a made-up key,
// so that a request without the SDK's credentials fails loudly.
const apiKey = "sk-fake-0123456789"

// answer is what the fake provider answers, in the chunks it streams; the
// whole answer is their concatenation.
var answer = []string{"Hello", " from", " the", " fake", " provider."}

// reply is the fake provider's answer to one try: an error status, or the
// answer (as JSON, or streamed when the request asks for a stream).
type reply struct {
	status int           // 0: the answer, with 200
	header []string      // name, value, name, value, ...
	cut    bool          // drop the connection halfway through the JSON or, streamed, after the first chunk
	hold   chan struct{} // streamed: after the first chunk, wait until closed
	// streamed: after a first chunk with the role alone, an error chunk of
	// this type (its 200 already sent), and the end of the stream
	streamErr string
}

// streamFail is a stream that fails with an error chunk of type typ
// ("server_error") before its first token, as the API does when it fails
// after it has answered 200.
func streamFail(typ string) reply { return reply{streamErr: typ} }

// fail is a reply with an error status and headers (name, value, ...).
func fail(status int, header ...string) reply { return reply{status: status, header: header} }

// ok is the answer.
func ok() reply { return reply{} }

// try is what the fake provider saw of one request.
type try struct {
	retryCount string // X-Stainless-Retry-Count as the SDK sent it
	stream     bool
}

// provider is a fake OpenAI API on 127.0.0.1. It plays one reply of its plan
// per try of POST /v1/chat/completions, repeating the last when the plan
// runs out (none: always the answer), and records every try. It is safe for
// concurrent use by multiple goroutines.
type provider struct {
	*httptest.Server
	mu    sync.Mutex
	plan  []reply
	tries []try
}

// newProvider starts a fake provider; Close stops it.
func newProvider(plan ...reply) *provider {
	p := &provider{plan: plan}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// Plan replaces the plan (try n gets plan[n-1]); call it before the first try.
func (p *provider) Plan(plan ...reply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan = plan
}

// Tries returns what the provider saw, one entry per try, in order.
func (p *provider) Tries() []try {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]try(nil), p.tries...)
}

// RetryCounts returns the X-Stainless-Retry-Count of every try, in order.
func (p *provider) RetryCounts() []string {
	var counts []string
	for _, t := range p.Tries() {
		counts = append(counts, t.retryCount)
	}
	return counts
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "no such endpoint")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+apiKey {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "incorrect API key")
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_body", "body is not a chat completion request")
		return
	}

	p.mu.Lock()
	n := len(p.tries)
	p.tries = append(p.tries, try{retryCount: r.Header.Get("X-Stainless-Retry-Count"), stream: req.Stream})
	rep := ok()
	if len(p.plan) > 0 {
		rep = p.plan[min(n, len(p.plan)-1)]
	}
	p.mu.Unlock()

	for i := 0; i+1 < len(rep.header); i += 2 {
		w.Header().Set(rep.header[i], rep.header[i+1])
	}
	switch {
	case rep.status != 0 && rep.status != http.StatusOK:
		writeStatus(w, rep.status)
	case req.Stream:
		p.stream(w, r, req.Model, rep)
	case rep.cut:
		writeCut(w, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "choices": []any{}})
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": strings.Join(answer, ""), "refusal": nil},
				"finish_reason": "stop",
				"logprobs":      nil,
			}},
			"usage": map[string]any{"prompt_tokens": 5, "completion_tokens": len(answer), "total_tokens": 5 + len(answer)},
		})
	}
}

// stream sends the answer as chat.completion.chunk events, flushing each.
func (p *provider) stream(w http.ResponseWriter, r *http.Request, model string, rep reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	event := func(delta map[string]any, finish any) {
		data, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		fmt.Fprintf(w, "data: %s\n\n", data)
		flusher.Flush()
	}
	if rep.streamErr != "" {
		event(map[string]any{"role": "assistant", "content": ""}, nil)
		data, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": "The server had an error while processing your request.", "type": rep.streamErr, "param": nil, "code": nil}})
		fmt.Fprintf(w, "data: %s\n\n", data)
		flusher.Flush()
		return
	}
	for i, chunk := range answer {
		delta := map[string]any{"content": chunk}
		if i == 0 {
			delta["role"] = "assistant"
		}
		event(delta, nil)
		if i > 0 {
			continue
		}
		if rep.cut {
			panic(http.ErrAbortHandler) // the connection drops mid-stream
		}
		if rep.hold != nil {
			select {
			case <-rep.hold:
			case <-r.Context().Done():
				return
			}
		}
	}
	event(map[string]any{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
	flusher.Flush()
}

// writeStatus writes an error as the OpenAI API does.
func writeStatus(w http.ResponseWriter, status int) {
	switch status {
	case http.StatusTooManyRequests:
		writeError(w, status, "requests", "rate_limit_exceeded", "Rate limit reached for requests")
	case http.StatusServiceUnavailable:
		writeError(w, status, "server_error", "service_unavailable", "The server is overloaded or not ready yet.")
	case http.StatusBadRequest, http.StatusConflict:
		writeError(w, status, "invalid_request_error", "", http.StatusText(status))
	default:
		writeError(w, status, "server_error", "", http.StatusText(status))
	}
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

// writeCut promises v as JSON, sends half of it, and drops the connection.
func writeCut(w http.ResponseWriter, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data[:len(data)/2])
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
