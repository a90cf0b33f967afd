package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// KeyByModel (issue 32): the model read from Gemini's path or a JSON
// body's GetBody copy, the host's key when none is found, never a panic
// and never more than 40 ms of real time.

const (
	openAIChat   = "https://api.openai.com/v1/chat/completions"
	anthropicMsg = "https://api.anthropic.com/v1/messages"
	geminiAPI    = "https://generativelanguage.googleapis.com/v1beta/models/"
	vertexAPI    = "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/"
)

// pastTheCut is a JSON body of more than 64 KiB, with the model first or last.
func pastTheCut(modelFirst bool) string {
	messages := `"messages":[{"role":"user","content":"` + strings.Repeat("word ", 14000) + `"}]`
	if modelFirst {
		return `{"model":"gpt-4o",` + messages + `}`
	}
	return `{` + messages + `,"model":"gpt-4o"}`
}

// withCopy is req with a GetBody that returns a copy made by body, or
// fails ("error"), or panics ("panic").
func withCopy(req *http.Request, body func() io.ReadCloser, fails string) *http.Request {
	req.GetBody = func() (io.ReadCloser, error) {
		switch fails {
		case "error":
			return nil, errors.New("GetBody failed")
		case "panic":
			panic("GetBody panicked")
		}
		return body(), nil
	}
	return req
}

// keyByModelTests are the rows of TestKeyByModel: a request, and the key
// KeyByModel gives it.
func keyByModelTests(t *testing.T) []struct {
	name string
	req  *http.Request
	want string
} {
	post := func(url, body string) *http.Request {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		return req
	}
	hostile := func(then, data string) *http.Request {
		return withCopy(post(openAIChat, data), func() io.ReadCloser { return &hostileCopy{r: bytes.NewReader([]byte(data)), then: then} }, "")
	}
	get, err := http.NewRequest(http.MethodGet, "https://api.openai.com/v1/models", nil)
	require.NoError(t, err)
	piped := post(openAIChat, `{"model":"gpt-4o"}`)
	piped.GetBody = nil // a body that can be read once: never read for a key
	relative := post("/v1/chat/completions", `{"model":"gpt-4o"}`)
	return []struct {
		name string
		req  *http.Request
		want string
	}{
		{"OpenAI chat", post(openAIChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`), "https://api.openai.com/gpt-4o"},
		{"OpenAI chat, streaming", post(openAIChat, `{"messages":[],"stream":true,"stream_options":{"include_usage":true},"model":"gpt-4o-mini"}`), "https://api.openai.com/gpt-4o-mini"},
		{"OpenAI Responses", post("https://api.openai.com/v1/responses", `{"model":"o3","input":"hi"}`), "https://api.openai.com/o3"},
		{"Anthropic", post(anthropicMsg, `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[]}`), "https://api.anthropic.com/claude-sonnet-4-5"},
		{"Anthropic, streaming", post(anthropicMsg, `{"model":"claude-haiku-4-5","stream":true,"messages":[]}`), "https://api.anthropic.com/claude-haiku-4-5"},
		{"Gemini", post(geminiAPI+"gemini-2.0-flash:generateContent", `{"contents":[]}`), "https://generativelanguage.googleapis.com/gemini-2.0-flash"},
		{"Gemini, streaming", post(geminiAPI+"gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[]}`), "https://generativelanguage.googleapis.com/gemini-2.5-pro"},
		{"Vertex AI", post(vertexAPI+"google/models/gemini-2.5-flash:generateContent", `{"contents":[]}`), "https://us-central1-aiplatform.googleapis.com/gemini-2.5-flash"},
		{"Vertex AI, Anthropic's", post(vertexAPI+"anthropic/models/claude-sonnet-4@20250514:streamRawPredict", `{"anthropic_version":"vertex-2023-10-16"}`), "https://us-central1-aiplatform.googleapis.com/claude-sonnet-4@20250514"},
		{"the path before the body", post(geminiAPI+"gemini-2.0-flash:generateContent", `{"model":"gpt-4o"}`), "https://generativelanguage.googleapis.com/gemini-2.0-flash"},
		{"Gemini's OpenAI endpoint: the body", post("https://generativelanguage.googleapis.com/v1beta/openai/chat/completions", `{"model":"gemini-2.0-flash"}`), "https://generativelanguage.googleapis.com/gemini-2.0-flash"},
		{"the host lowercased, the model not", post("HTTPS://API.OpenAI.com/v1/chat/completions", `{"model":"GPT-4o"}`), "https://api.openai.com/GPT-4o"},
		{"over 64 KiB, the model first", post(openAIChat, pastTheCut(true)), "https://api.openai.com/gpt-4o"},
		{"over 64 KiB, the model past the cut", post(openAIChat, pastTheCut(false)), "https://api.openai.com"},
		{"not JSON", post(openAIChat, `model=gpt-4o`), "https://api.openai.com"},
		{"no model", post(openAIChat, `{"messages":[]}`), "https://api.openai.com"},
		{"the model null", post(openAIChat, `{"model":null}`), "https://api.openai.com"},
		{"no body", get, "https://api.openai.com"},
		{"no GetBody", piped, "https://api.openai.com"},
		{"GetBody fails", withCopy(post(openAIChat, `{"model":"gpt-4o"}`), nil, "error"), "https://api.openai.com"},
		{"GetBody panics", withCopy(post(openAIChat, `{"model":"gpt-4o"}`), nil, "panic"), "https://api.openai.com"},
		{"the copy's Read panics after the model", hostile("panic", `{"model":"gpt-4o",`), "https://api.openai.com/gpt-4o"},
		{"the copy's Read panics before it", hostile("panic", `{"messages":[],`), "https://api.openai.com"},
		{"the copy's Read returns a count that cannot be, after the model", hostile("count", `{"model":"gpt-4o"`), "https://api.openai.com/gpt-4o"},
		{"no host: left out", relative, ""},
	}
}

// ownKeyByModel is a key function of one's own around KeyByModel (it
// leaves out the requests an app marks so): the Cooldown calls it, where
// it reads KeyByModel's key itself.
func ownKeyByModel(r *http.Request) string {
	if r.Header.Get("X-No-Cooldown") != "" {
		return ""
	}
	return KeyByModel(r)
}

// TestKeyByModel: each row's key, the same by KeyByModel and by a
// Cooldown given it (which reads the key itself); and the request is left
// as it was, its body unread.
func TestKeyByModel(t *testing.T) {
	byModel := NewCooldown(KeyByModel)
	require.True(t, byModel.byModel, "NewCooldown knows KeyByModel")
	wrapped := NewCooldown(ownKeyByModel)
	require.False(t, wrapped.byModel, "a function of one's own is called")
	for _, tt := range keyByModelTests(t) {
		t.Run(tt.name, func(t *testing.T) {
			var sent []byte
			if tt.req.Body != nil {
				sent, _ = io.ReadAll(tt.req.Body) // what the transport sends, read first: GetBody's copy is not it
				tt.req.Body = io.NopCloser(bytes.NewReader(sent))
			}
			url, length := tt.req.URL.String(), tt.req.ContentLength
			assert.Equal(t, tt.want, KeyByModel(tt.req))
			assert.Equal(t, tt.want, byModel.keyOf(tt.req, nil), "the Cooldown's own reading")
			assert.Equal(t, tt.want, wrapped.keyOf(tt.req, nil))
			assert.Equal(t, url, tt.req.URL.String(), "the URL is left as it was")
			assert.Equal(t, length, tt.req.ContentLength)
			if tt.req.Body != nil {
				left, _ := io.ReadAll(tt.req.Body)
				assert.Equal(t, sent, left, "req.Body is not read")
			}
		})
	}
}

// TestKeyByModelAgreesWithTheKit: the model KeyByModel reads is the one
// the kit's Provider charges (retryhttptest.RequestModel), for every row
// of 64 KiB or less whose copy reads whole. (Of a longer body the kit reads
// no model; KeyByModel reads the first 64 KiB, as a provider reads it all.)
func TestKeyByModelAgreesWithTheKit(t *testing.T) {
	for _, tt := range keyByModelTests(t) {
		if tt.req.GetBody == nil || tt.req.URL.Host == "" || tt.req.ContentLength > maxDrain || strings.Contains(tt.name, "copy") || strings.Contains(tt.name, "GetBody") {
			continue
		}
		body, err := tt.req.GetBody()
		require.NoError(t, err)
		b, _ := io.ReadAll(body)
		model := retryhttptest.RequestModel(tt.req, b)
		want := strings.ToLower(tt.req.URL.Scheme + "://" + tt.req.URL.Host)
		if model != "" {
			want += "/" + model
		}
		assert.Equal(t, want, KeyByModel(tt.req), tt.name)
	}
}

// TestKeyByModelBoundedInRealTime: a copy whose Read blocks gives the
// host's key within the 40 ms bound, not when the Read returns.
func TestKeyByModelBoundedInRealTime(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	req, err := http.NewRequest(http.MethodPost, openAIChat, strings.NewReader(`{"model":"gpt-4o"}`))
	require.NoError(t, err)
	withCopy(req, func() io.ReadCloser {
		return &hostileCopy{r: bytes.NewReader([]byte(`{"model":"gpt-4o"`)), then: "block", release: release}
	}, "")
	for _, key := range []func(*http.Request) string{KeyByModel, func(r *http.Request) string { return NewCooldown(KeyByModel).keyOf(r, nil) }} {
		start := time.Now()
		assert.Equal(t, "https://api.openai.com", key(req))
		assert.Less(t, time.Since(start), time.Second, "within the read's bound (40 ms), not the Read's")
	}
}

// TestKeyByModelNilRequest: a nil request, or one with no URL, is left
// out.
func TestKeyByModelNilRequest(t *testing.T) {
	assert.Empty(t, KeyByModel(nil))
	assert.Empty(t, KeyByModel(&http.Request{}))
}

// TestKeyByModelLongKey: a model that makes the key longer than 256 bytes
// is kept by its SHA-256, and still found for its calls only (a hashed key
// has no host to look at: every call of a host then reads its model).
func TestKeyByModelLongKey(t *testing.T) {
	long := strings.Repeat("m", 300)
	for _, key := range []func(*http.Request) string{KeyByModel, ownKeyByModel} {
		cd := NewCooldown(key)
		req := newRequest(t, context.Background(), http.MethodPost, openAIChat, []byte(`{"model":"`+long+`"}`))
		other := newRequest(t, context.Background(), http.MethodPost, openAIChat, []byte(`{"model":"gpt-4o"}`))
		k := cd.keyOf(req, nil)
		require.Equal(t, hashedFormOf("https://api.openai.com/"+long), k)
		holdFor(cd, k, time.Now(), time.Hour)
		assert.NotNil(t, cd.find(req), "its calls are held")
		assert.Nil(t, cd.find(other), "another model's are not")
		assert.False(t, cd.Until(KeyByModel(req)).IsZero(), "Until takes the key as KeyByModel writes it")
	}
}
