package signal

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// modelTests are rows of TestAppendModel: a request body and the model it
// asks for, "" for none.
var modelTests = []struct {
	name string
	body string
	want string
}{
	// Providers' bodies.
	{"OpenAI chat", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, "gpt-4o"},
	{"OpenAI Responses", `{"model":"o3","input":"hi","max_output_tokens":300}`, "o3"},
	{"Anthropic", `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, "claude-sonnet-4-5"},
	{"the model last", `{"messages":[{"role":"user","content":"\"model\":\"no\""}],"stream":true,"model":"gpt-4o-mini"}`, "gpt-4o-mini"},
	{"a path in the model (OpenRouter)", `{"model":"openai/gpt-4o"}`, "openai/gpt-4o"},
	{"pretty-printed", "{\n  \"model\" : \"gpt-4o\",\n\t\"n\": 1\r\n}\n", "gpt-4o"},

	// None.
	{"no model", `{"messages":[]}`, ""},
	{"empty object", `{}`, ""},
	{"the empty model", `{"model":""}`, ""},
	{"null", `{"model":null}`, ""},
	{"a number", `{"model":4}`, ""},
	{"an object", `{"model":{"name":"gpt-4o"}}`, ""},
	{"an array", `{"model":["gpt-4o"]}`, ""},
	{"Model is another key", `{"Model":"gpt-4o"}`, ""},
	{"nested in metadata", `{"metadata":{"model":"gpt-4o"}}`, ""},
	{"nested in a message", `{"messages":[{"model":"gpt-4o"}]}`, ""},
	{"a top-level array", `[{"model":"gpt-4o"}]`, ""},
	{"a string", `"gpt-4o"`, ""},
	{"not JSON", `model=gpt-4o`, ""},
	{"empty", ``, ""},

	// Twice: the last, as encoding/json keeps it.
	{"twice: the last", `{"model":"a","model":"b"}`, "b"},
	{"twice: the last is null", `{"model":"a","model":null}`, ""},
	{"twice: the last is a string", `{"model":1,"model":"b"}`, "b"},
	{"a nested model does not replace it", `{"model":"a","metadata":{"model":"b"}}`, "a"},

	// Escapes, as encoding/json unescapes them.
	{"an escaped dash", `{"model":"gpt\u002d4o"}`, "gpt-4o"},
	{"a quote and a backslash", `{"model":"a\"b\\c\/d"}`, `a"b\c/d`},
	{"control escapes", `{"model":"\b\f\n\r\t"}`, "\b\f\n\r\t"},
	{"a surrogate pair", `{"model":"\ud83d\ude00"}`, "\U0001F600"},
	{"a lone surrogate", `{"model":"a\ud83db"}`, "a\uFFFDb"},
	{"a low surrogate first", `{"model":"\ude00\ud83d"}`, "\uFFFD\uFFFD"},
	{"invalid UTF-8", "{\"model\":\"gp\xfft\"}", "gp\uFFFDt"},
	{"an escaped key", `{"mod\u0065l":"gpt-4o"}`, "gpt-4o"},
	{"an escaped key of another name", `{"mod\u0065ls":"gpt-4o"}`, ""},
	{"an unknown escape", `{"model":"a\x"}`, ""},
	{"a raw control character", "{\"model\":\"a\x01\"}", ""},

	// Cut short, or broken after the model.
	{"cut in the model", `{"model":"gpt-4`, ""},
	{"cut after the model", `{"model":"gpt-4o","messages":[{"role":"us`, "gpt-4o"},
	{"cut after a second model", `{"model":"a","model":"b`, "a"},
	{"broken after the model", `{"model":"gpt-4o" "x":1}`, "gpt-4o"},
	{"broken before the model", `{"x":1 "model":"gpt-4o"}`, ""},
}

// TestAppendModel: each row's model, appended after what dst holds; on
// valid JSON, what encoding/json reads.
func TestAppendModel(t *testing.T) {
	for _, tt := range modelTests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, string(AppendModel(nil, []byte(tt.body))))
			assert.Equal(t, "https://x/"+tt.want, string(AppendModel([]byte("https://x/"), []byte(tt.body))))
			if json.Valid([]byte(tt.body)) {
				assert.Equal(t, fzModel([]byte(tt.body)), tt.want, "encoding/json reads the same")
			}
		})
	}
}

// TestAppendModelLongKeys: keys near keyIs's bound are read as
// encoding/json reads them.
func TestAppendModelLongKeys(t *testing.T) {
	escaped := `\u006d\u006f\u0064\u0065\u006c` // 30 raw bytes
	for _, key := range []string{escaped, escaped + "x", `\u006d\u006f\u0064\u0065\u006c\u0000`, strings.Repeat("m", 31), "model\u0000"} {
		body := []byte(`{"` + key + `":"gpt-4o"}`)
		assert.Equal(t, fzModel(body), string(AppendModel(nil, body)), "%s", body)
	}
}
