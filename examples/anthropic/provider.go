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

// apiKey is what the fake provider expects: a made-up key, so that a request
// without the SDK's credentials fails loudly.
const apiKey = "sk-ant-fake-0123456789"

// answer is what the fake provider answers, in the text deltas it streams;
// the whole answer is their concatenation.
var answer = []string{"Hello", " from", " the", " fake", " provider."}

// reply is the fake provider's answer to one try: an error status, or the
// answer (as JSON, or streamed when the request asks for a stream).
type reply struct {
	status int           // 0: the answer, with 200
	header []string      // name, value, name, value, ...
	cut    bool          // drop the connection halfway through the JSON or, streamed, after the first text delta
	hold   chan struct{} // streamed: after the first text delta, wait until closed
	// streamed: after message_start, an error event of this type (its 200
	// already sent), and the end of the stream, as the API fails a stream
	streamErr string
}

// streamFail is a stream that fails with an error event of type typ
// ("overloaded_error") after its opening, as the Messages API does when it
// is overloaded after it has answered 200.
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

// provider is a fake Anthropic API on 127.0.0.1. It plays one reply of its
// plan per try of POST /v1/messages, repeating the last when the plan runs
// out (none: always the answer), and records every try. It is safe for
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
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, "not_found_error", "no such endpoint")
		return
	}
	// The API takes the key in X-Api-Key; this SDK sends it as a bearer token.
	if r.Header.Get("X-Api-Key") != apiKey && r.Header.Get("Authorization") != "Bearer "+apiKey {
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
		return
	}
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" || req.MaxTokens <= 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "body is not a messages request")
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

	w.Header().Set("Request-Id", fmt.Sprintf("req_fake_%d", n+1))
	for i := 0; i+1 < len(rep.header); i += 2 {
		w.Header().Set(rep.header[i], rep.header[i+1])
	}
	switch {
	case rep.status != 0 && rep.status != http.StatusOK:
		writeStatus(w, rep.status)
	case req.Stream:
		p.stream(w, r, req.Model, rep)
	case rep.cut:
		writeCut(w, message(req.Model, strings.Join(answer, ""), "end_turn", len(answer)))
	default:
		writeJSON(w, http.StatusOK, message(req.Model, strings.Join(answer, ""), "end_turn", len(answer)))
	}
}

func message(model, text string, stop any, outputTokens int) map[string]any {
	content := []any{}
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	return map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 5, "output_tokens": outputTokens},
	}
}

// stream sends the answer as the Messages API's server-sent events, flushing
// each.
func (p *provider) stream(w http.ResponseWriter, r *http.Request, model string, rep reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	event := func(typ string, v map[string]any) {
		v["type"] = typ
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
		flusher.Flush()
	}
	event("message_start", map[string]any{"message": message(model, "", nil, 1)})
	if rep.streamErr != "" {
		event("error", map[string]any{"error": map[string]any{"type": rep.streamErr, "message": "The stream failed: " + rep.streamErr}})
		return
	}
	event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for i, chunk := range answer {
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": chunk}})
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
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": len(answer)},
	})
	event("message_stop", map[string]any{})
}

// writeStatus writes an error as the Anthropic API does.
func writeStatus(w http.ResponseWriter, status int) {
	switch status {
	case http.StatusTooManyRequests:
		writeError(w, status, "rate_limit_error", "Number of requests has exceeded your rate limit.")
	case 529:
		writeError(w, status, "overloaded_error", "Overloaded")
	case http.StatusBadRequest, http.StatusConflict:
		writeError(w, status, "invalid_request_error", http.StatusText(status))
	default:
		writeError(w, status, "api_error", "Internal server error")
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
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
