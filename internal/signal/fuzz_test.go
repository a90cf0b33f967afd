package signal

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/store"
)

// Fuzz tests of the readers of a body: a request body's output cap (R23)
// and model (R17), and which limit a 429's body names (R23). `go test` runs the seeds below and every
// input kept under testdata/fuzz/<Name>/;
// `go test -run '^$' -fuzz FuzzOutputCap -fuzztime 60s` searches for more.

// FuzzOutputCap: whatever the body, OutputCap never panics and is never
// negative or past 2^62; on valid JSON it is what encoding/json reads
// (fzOutputCap), and no cut of valid JSON asks for more than the whole.
func FuzzOutputCap(f *testing.F) {
	for _, tt := range outputCapTests {
		if len(tt.body) <= 16<<10 {
			f.Add([]byte(tt.body))
		}
	}
	f.Add([]byte(cutSample.body))
	for _, seed := range []string{
		`{"max_tokens":null,"max_output_tokens":7}`, `{"max_tokens":"1"}`, `{"max_tokens":1,"max_tokens":9}`,
		`{"generationConfig":{"maxOutputTokens":1},"generation_config":{"max_output_tokens":2}}`,
		`{"a":"\\\"","max_tokens":7}`, `{"max\u005ftokens":1}`, `{"max_tokens":4611686018427387909}`,
		`{"max_tokens":1e2}`, `{"max_tokens":-1}`, `{"max_tokens":0.5}`, "{\"max_tokens\":1\x00}", "\xff{",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		outCap := OutputCap(body)
		require.True(t, outCap >= 0 && outCap <= mostTokens, "OutputCap(%q) = %d: in [0, 2^62]", body, outCap)
		if !json.Valid(body) {
			return
		}
		if !bytes.Contains(body, []byte(`\u`)) { // OutputCap leaves escapes in keys as they are
			require.Equal(t, fzOutputCap(body), outCap, "OutputCap(%q): what encoding/json reads", body)
		}
		if len(body) <= 512 {
			for n := range len(body) {
				require.LessOrEqual(t, OutputCap(body[:n]), outCap, "OutputCap(%q), cut at %d: no more than the whole", body, n)
			}
		}
	})
}

// fzOutputCap is outputCap by encoding/json, for a valid JSON body: the
// largest non-negative integer of every top-level cap key and of every
// cap key of a generationConfig object, saturated at 2^62.
func fzOutputCap(body []byte) int64 {
	var best int64
	fzMembers(body, func(key string, v json.RawMessage) {
		switch key {
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			best = max(best, fzCapValue(v))
		case "generationConfig", "generation_config":
			fzMembers(v, func(key string, v json.RawMessage) {
				if key == "maxOutputTokens" || key == "max_output_tokens" {
					best = max(best, fzCapValue(v))
				}
			})
		}
	})
	return best
}

// fzMembers calls f with each member of the JSON object b, in order,
// repeated keys included; with none when b is not an object.
func fzMembers(b []byte, f func(key string, v json.RawMessage)) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		var v json.RawMessage
		if err != nil || !ok || dec.Decode(&v) != nil {
			return
		}
		f(key, v)
	}
}

// fzCapValue is a cap's value: a non-negative integer, saturated at 2^62;
// 0 for any other value.
func fzCapValue(v json.RawMessage) int64 {
	s := string(bytes.TrimSpace(v))
	if !fzDigits(s) {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > mostTokens { // past int64, or past 2^62
		return mostTokens
	}
	return n
}

// FuzzBodyLimits: whatever the bytes, bodyLimits never panics, names only
// lanes that exist, and agrees with parseErrorBody (its limits and
// tooLarge) and with errorLimits of each envelope encoding/json decodes;
// tooLarge goes with the tokens lane and Exhausted; and an object reads
// the same with bytes after it and inside an array (Vertex AI).
func FuzzBodyLimits(f *testing.F) {
	for _, tt := range bodyLimitsTests {
		f.Add([]byte(tt.body))
	}
	for _, s := range readGolden(f) {
		for _, b := range s.bodies {
			f.Add([]byte(b))
		}
	}
	for _, seed := range []string{openAIQuota, geminiPerDay, google504, `{"error":{"type":"rate_limit_error","message":5}}`, `[{"error":{}}]`, `{`, "\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		hit, tooLarge := bodyLimits(body)
		h := ErrorBody(body)
		require.Equal(t, h.Limits, hit, "bodyLimits(%q): parseErrorBody's limits", body)
		require.Equal(t, h.TooLarge, tooLarge, "bodyLimits(%q): parseErrorBody's tooLarge", body)
		require.Zero(t, hit&^(1<<NumLanes-1), "bodyLimits(%q) = %#v: lanes that exist", body, hit)
		if tooLarge {
			require.True(t, h.Exhausted && hit.Has(store.Tokens), "bodyLimits(%q): too large is Exhausted, on the tokens lane", body)
		}
		wantHit, wantLarge := fzEnvelopeLimits(body)
		require.Equal(t, wantHit, hit, "bodyLimits(%q): errorLimits of each envelope", body)
		require.Equal(t, wantLarge, tooLarge, "bodyLimits(%q): errorLimits of each envelope, too large", body)

		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if !json.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{' || len(body) >= 9000 {
			return // not an object, or one near encoding/json's depth limit, which an array passes
		}
		for _, b := range [][]byte{append(bytes.Clone(body), "}]garbage"...), []byte("[" + string(body) + "]"), []byte("[" + string(body) + "," + string(body) + "]")} {
			h, large := bodyLimits(b)
			require.Equal(t, refusal{hit, tooLarge}, refusal{h, large}, "bodyLimits(%q) and bodyLimits(%q)", body, b)
		}
	})
}

// fzEnvelopeLimits decodes body as parseErrorBody does and combines
// errorLimits of each {"error": {...}} envelope it holds: the object, or
// each element of an array.
func fzEnvelopeLimits(body []byte) (hit Lanes, tooLarge bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return 0, false
	}
	envelopes, ok := v.([]any)
	if !ok {
		envelopes = []any{v}
	}
	for _, env := range envelopes {
		env, _ := env.(map[string]any)
		if e, ok := env["error"].(map[string]any); ok {
			h, large := errorLimits(e)
			hit, tooLarge = hit|h, tooLarge || large
		}
	}
	return hit, tooLarge
}

// fzDigits reports whether s is one digit or more, and nothing else.
func fzDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FuzzModel: whatever the body, AppendModel never panics and keeps what
// dst holds; on valid JSON it is what encoding/json reads (fzModel, as
// retryhttptest.RequestModel reads a body); and a cut of valid JSON with
// one top-level "model" gives that model or none.
func FuzzModel(f *testing.F) {
	for _, tt := range modelTests {
		f.Add([]byte(tt.body))
	}
	for _, tt := range outputCapTests {
		if len(tt.body) <= 16<<10 {
			f.Add([]byte(tt.body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := AppendModel([]byte("k/"), body)
		require.True(t, bytes.HasPrefix(got, []byte("k/")), "AppendModel(%q) keeps dst", body)
		if !json.Valid(body) {
			return
		}
		model := string(got[len("k/"):])
		require.Equal(t, fzModel(body), model, "AppendModel(%q): what encoding/json reads", body)
		if len(body) > 512 || fzCount(body, "model") != 1 {
			return
		}
		for n := range len(body) {
			if m := string(AppendModel(nil, body[:n])); m != "" {
				require.Equal(t, model, m, "AppendModel(%q), cut at %d: the whole's model or none", body, n)
			}
		}
	})
}

// fzModel is the model of a body by encoding/json, as
// retryhttptest.RequestModel reads it: the top-level "model" of an object,
// when it is a string.
func fzModel(body []byte) string {
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

// fzCount is how many top-level members of the object b have the key.
func fzCount(b []byte, key string) int {
	n := 0
	fzMembers(b, func(k string, _ json.RawMessage) {
		if k == key {
			n++
		}
	})
	return n
}
