package retryhttptest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modelBody is a JSON body of exactly n bytes that asks for model.
func modelBody(model string, n int) string {
	head, tail := `{"model":"`+model+`","messages":"`, `"}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

func TestRequestModel(t *testing.T) {
	tests := []struct {
		url, body string
		want      string
	}{
		{"https://api.openai.com/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`, "gpt-4o"},
		{"https://api.anthropic.com/v1/messages", `{"max_tokens":1024,"messages":[{"role":"user","content":"hi"}],"model":"claude-sonnet-4-5"}`, "claude-sonnet-4-5"},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent", `{"contents":[]}`, "gemini-2.0-flash"},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", "", "gemini-2.0-flash"},
		{"https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", "", "gemini-2.5-pro"},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent", `{"model":"other"}`, "gemini-2.0-flash"},
		{"https://api.openai.com/v1/models/gpt-4o", "", ""},
		{"https://generativelanguage.googleapis.com/v1beta/models/:generateContent", "", ""},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini:generateContent/x", "", ""},
		{"https://api.openai.com/v1/chat/completions", modelBody("gpt-4o", 64<<10), "gpt-4o"},
		{"https://api.openai.com/v1/chat/completions", modelBody("gpt-4o", 64<<10+1), ""},
		{"https://api.openai.com/v1/chat/completions", `model=gpt-4o`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"model":"gpt-4o"`, ""},
		{"https://api.openai.com/v1/chat/completions", `["model","gpt-4o"]`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"Model":"gpt-4o"}`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"model":4}`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"input":{"model":"gpt-4o"}}`, ""},
		{"https://api.openai.com/v1/chat/completions", "", ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodPost, tt.url, nil)
		require.NoError(t, err)
		assert.Equal(t, tt.want, retryhttptest.RequestModel(req, []byte(tt.body)), "%s %.60q", tt.url, tt.body)
	}
	assert.Equal(t, "gpt-4o", retryhttptest.RequestModel(nil, []byte(`{"model":"gpt-4o"}`)), "a nil request")
}
