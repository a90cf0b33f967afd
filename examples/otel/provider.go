package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// reply is the fake provider's answer to one try: an error status with its
// headers, or (status 0 or 200) the answer.
type reply struct {
	status int
	header []string // name, value, name, value, ...
}

// fail is a reply with an error status and headers (name, value, ...).
func fail(status int, header ...string) reply { return reply{status: status, header: header} }

// ok is the answer.
func ok() reply { return reply{} }

// answer is what the fake provider says when it answers.
const answer = "Hello from the fake provider."

// provider is a fake LLM API on 127.0.0.1: POST /v1/chat/completions plays
// one reply of its plan per try, repeating the last when the plan runs out
// (none: always the answer). It records the traceparent header of every
// try, so a test can tell which span each try was sent under. It is safe for
// concurrent use by multiple goroutines.
type provider struct {
	*httptest.Server
	mu      sync.Mutex
	plan    []reply
	parents []string // traceparent of every try, in order
}

// newProvider starts a fake provider; Close stops it.
func newProvider(plan ...reply) *provider {
	p := &provider{plan: plan}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// Traceparents returns the traceparent header of every try, in order.
func (p *provider) Traceparents() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.parents...)
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeJSON(w, http.StatusNotFound, "no such endpoint")
		return
	}
	p.mu.Lock()
	n := len(p.parents)
	p.parents = append(p.parents, r.Header.Get("Traceparent"))
	rep := ok()
	if len(p.plan) > 0 {
		rep = p.plan[min(n, len(p.plan)-1)]
	}
	p.mu.Unlock()

	for i := 0; i+1 < len(rep.header); i += 2 {
		w.Header().Set(rep.header[i], rep.header[i+1])
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		writeJSON(w, rep.status, http.StatusText(rep.status)+" (try "+strconv.Itoa(n+1)+")")
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// writeJSON writes {"message": msg} with status, as an LLM API would.
func writeJSON(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
