package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// apiKey is what the fake Gemini API expects in x-goog-api-key, the header
// the SDK sends it in: a made-up key, so that a request without the SDK's
// credentials fails loudly.
const apiKey = "AIza-fake-0123456789"

// model is the model every call here asks for.
const model = "gemini-2.5-flash"

// answer is what the fake Gemini API answers, in the chunks it streams; the
// whole answer is their concatenation.
var answer = []string{"Hello", " from", " the", " fake", " Gemini."}

// Quota IDs of the Gemini API's free tier, as its 429s name them in a
// google.rpc.QuotaFailure violation.
const (
	perMinute = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
	perDay    = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
)

// reply is the fake Gemini API's answer to one try: an error status, or the
// answer (as JSON, or streamed when the request asks for a stream).
type reply struct {
	status     int      // 0: the answer, with 200
	header     []string // name, value, name, value, ...
	quotaID    string   // 429: the quota the QuotaFailure names
	retryDelay string   // 429: the RetryInfo retryDelay ("2.5s"); "": no RetryInfo
	cut        bool     // streamed: drop the connection after the first chunk
	token      bool     // streamed: the first chunk carries a continuation token
	streamErr  bool     // streamed: an error chunk first (UNAVAILABLE), its 200 already sent, then the end
}

// streamFail is a stream that fails before its first chunk of text with an
// error chunk, UNAVAILABLE, as Gemini does when the model is overloaded
// after it has answered 200.
func streamFail() reply { return reply{streamErr: true} }

// ok is the answer.
func ok() reply { return reply{} }

// fail is a reply with an error status (in the Google error envelope) and
// headers (name, value, ...).
func fail(status int, header ...string) reply { return reply{status: status, header: header} }

// rateLimited is Gemini's 429 for the free tier's per-minute quota: the wait
// is in the body only, in a google.rpc.RetryInfo, with no Retry-After.
func rateLimited(retryDelay string) reply {
	return reply{status: http.StatusTooManyRequests, quotaID: perMinute, retryDelay: retryDelay}
}

// dailyQuota is Gemini's 429 for the free tier's per-day quota. Gemini puts
// a RetryInfo in it too, whose short delay does not bring the quota back.
func dailyQuota() reply {
	return reply{status: http.StatusTooManyRequests, quotaID: perDay, retryDelay: "17s"}
}

// try is what the fake Gemini API saw of one request.
type try struct {
	at                time.Time // on the provider's clock
	model             string
	stream            bool
	continuationToken string // the token a resumed stream sends back; "" on a first request
}

// provider is a fake Gemini API (generativelanguage.googleapis.com) on
// 127.0.0.1. It plays one reply of its plan per try of
// POST /v1beta/models/{model}:generateContent or
// :streamGenerateContent?alt=sse, repeating the last when the plan runs out
// (none: always the answer), and records every try. It is safe for
// concurrent use by multiple goroutines.
type provider struct {
	*httptest.Server
	now      func() time.Time // stamps each try
	mu       sync.Mutex
	plan     []reply
	tries    []try
	rejected int // requests refused before they count as a try: bad path, key or body
}

// newProvider starts a fake Gemini API; Close stops it.
func newProvider(plan ...reply) *provider {
	p := &provider{plan: plan, now: time.Now}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// Plan replaces the plan (try n gets plan[n-1]); call it before the first try.
func (p *provider) Plan(plan ...reply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan = plan
}

// SetClock stamps every try with now (retryhttptest's Clock, so the gap
// between tries is the transport's wait); call it before the first try.
func (p *provider) SetClock(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// Rejected returns how many requests were refused for a bad path, API key
// or body; they are not in Tries.
func (p *provider) Rejected() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rejected
}

// Tries returns what the provider saw, one entry per try, in order.
func (p *provider) Tries() []try {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]try(nil), p.tries...)
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	if !p.accept(w, r) {
		p.mu.Lock()
		p.rejected++
		p.mu.Unlock()
	}
}

// accept answers one request, and reports whether it was a try: a
// well-formed call of the API with the right key.
func (p *provider) accept(w http.ResponseWriter, r *http.Request) bool {
	// The Gemini API's paths: /v1beta/models/gemini-2.5-flash:generateContent.
	name, method, found := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
	stream := method == "streamGenerateContent"
	if r.Method != http.MethodPost || !found || name == "" || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") ||
		method != "generateContent" && !stream || stream && r.URL.Query().Get("alt") != "sse" {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.", nil)
		return false
	}
	switch key := r.Header.Get("x-goog-api-key"); {
	case key == "":
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED",
			"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", nil)
		return false
	case key != apiKey:
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"},
		})
		return false
	}
	var req struct {
		Contents []struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"contents"`
		ContinuationToken string `json:"continuationToken"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Contents) == 0 || len(req.Contents[0].Parts) == 0 {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified", nil)
		return false
	}

	p.mu.Lock()
	n := len(p.tries)
	p.tries = append(p.tries, try{at: p.now(), model: name, stream: stream, continuationToken: req.ContinuationToken})
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
		writeStatus(w, rep, name)
	case stream:
		from := 0
		if req.ContinuationToken != "" {
			from = 1 // resumed after the first chunk, the only checkpoint here
		}
		p.stream(w, name, rep, from)
	default:
		writeJSON(w, http.StatusOK, response(name, strings.Join(answer, ""), "STOP", nil))
	}
	return true
}

// response is a GenerateContentResponse as the Gemini API sends it: one
// candidate whose content is text, and the usage so far. finish "" is a
// chunk in the middle of a stream.
func response(name, text, finish string, token []byte) map[string]any {
	candidate := map[string]any{
		"content": map[string]any{"parts": []any{map[string]any{"text": text}}, "role": "model"},
		"index":   0,
	}
	if finish != "" {
		candidate["finishReason"] = finish
	}
	if token != nil {
		candidate["continuationToken"] = base64.StdEncoding.EncodeToString(token)
	}
	usage := map[string]any{"promptTokenCount": 4, "totalTokenCount": 4}
	if finish != "" {
		usage = map[string]any{"promptTokenCount": 4, "candidatesTokenCount": len(answer), "totalTokenCount": 4 + len(answer)}
	}
	return map[string]any{
		"candidates":    []any{candidate},
		"usageMetadata": usage,
		"modelVersion":  name,
		"responseId":    "fake-response-id",
	}
}

// stream sends the answer from chunk from on as server-sent events, one
// GenerateContentResponse per chunk, each flushed, as Gemini does with
// alt=sse.
func (p *provider) stream(w http.ResponseWriter, name string, rep reply, from int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	if rep.streamErr {
		data, _ := json.Marshal(map[string]any{"error": map[string]any{
			"code": http.StatusServiceUnavailable, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}})
		fmt.Fprintf(w, "data: %s\r\n\r\n", data)
		flusher.Flush()
		return
	}
	for i, chunk := range answer {
		if i < from {
			continue
		}
		finish := ""
		if i == len(answer)-1 {
			finish = "STOP"
		}
		var token []byte
		if i == 0 && rep.token {
			token = []byte("checkpoint-1")
		}
		data, _ := json.Marshal(response(name, chunk, finish, token))
		fmt.Fprintf(w, "data: %s\r\n\r\n", data)
		flusher.Flush()
		if i == 0 && rep.cut {
			panic(http.ErrAbortHandler) // the connection drops mid-stream
		}
	}
}

// writeStatus writes an error as the Gemini API does: the Google error
// envelope, application/json, and no Retry-After even on a 429.
func writeStatus(w http.ResponseWriter, rep reply, name string) {
	switch rep.status {
	case http.StatusTooManyRequests:
		details := []any{
			map[string]any{
				"@type": "type.googleapis.com/google.rpc.QuotaFailure",
				"violations": []any{map[string]any{
					"quotaMetric":     "generativelanguage.googleapis.com/generate_content_free_tier_requests",
					"quotaId":         rep.quotaID,
					"quotaDimensions": map[string]any{"location": "global", "model": name},
					"quotaValue":      "10",
				}},
			},
			map[string]any{
				"@type": "type.googleapis.com/google.rpc.Help",
				"links": []any{map[string]any{
					"description": "Learn more about Gemini API quotas",
					"url":         "https://ai.google.dev/gemini-api/docs/rate-limits",
				}},
			},
		}
		msg := "You exceeded your current quota, please check your plan and billing details. " +
			"For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n" +
			"* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: " + name
		if rep.retryDelay != "" {
			details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": rep.retryDelay})
			msg += "\nPlease retry in " + rep.retryDelay + "."
		}
		writeError(w, rep.status, "RESOURCE_EXHAUSTED", msg, details)
	case http.StatusServiceUnavailable:
		writeError(w, rep.status, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil)
	case http.StatusInternalServerError:
		writeError(w, rep.status, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", nil)
	case http.StatusGatewayTimeout:
		writeError(w, rep.status, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.", nil)
	case http.StatusBadRequest:
		writeError(w, rep.status, "INVALID_ARGUMENT", "Request contains an invalid argument.", nil)
	default:
		writeError(w, rep.status, "UNKNOWN", http.StatusText(rep.status), nil)
	}
}

// writeError writes the Google API error envelope:
// {"error":{"code":429,"message":"...","status":"RESOURCE_EXHAUSTED","details":[...]}}.
func writeError(w http.ResponseWriter, code int, status, msg string, details []any) {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if details != nil {
		e["details"] = details
	}
	writeJSON(w, code, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ") // Google's APIs answer indented JSON
	_ = enc.Encode(v)
}
