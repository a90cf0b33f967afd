package retryhttptest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The model a request asks for, as a provider finds it.

// maxModelBody is the most of a body RequestModel reads a model from: a
// longer body has none, as if it were not JSON.
const maxModelBody = 64 << 10

// RequestModel returns the model a request with this body asks for, as a
// provider finds it: in Gemini's path, the {model} of a last segment
// models/{model}:{method} (/v1beta/models/{model}:generateContent,
// :streamGenerateContent, and Vertex AI's
// .../publishers/google/models/{model}:...); else the top-level "model"
// string of a JSON body (OpenAI, Anthropic), matched exactly (not "Model",
// not a nested one). It returns "" when neither has one, and for a body of
// more than 64 KiB or that is not a JSON object. It only reads body, and
// req's URL; req may be nil.
func RequestModel(req *http.Request, body []byte) string {
	if req != nil && req.URL != nil {
		if m := pathModel(req.URL.Path); m != "" {
			return m
		}
	}
	if len(body) == 0 || len(body) > maxModelBody {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return ""
	}
	var m string
	if json.Unmarshal(fields["model"], &m) != nil {
		return ""
	}
	return m
}

// pathModel is the {model} of a path whose last segment is
// models/{model}:{method}, or "".
func pathModel(path string) string {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return ""
	}
	model, method, ok := strings.Cut(path[i+len("/models/"):], ":")
	if !ok || model == "" || method == "" || strings.Contains(model, "/") || strings.Contains(method, "/") {
		return ""
	}
	return model
}
