package retryhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// KeyByModel: the model read from Gemini's path or a JSON
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

// A Cooldown keyed by model: it holds the model the provider
// limited and no other, and a call makes its key once, whatever its tries.

// TestCooldownByModelHoldsOneModel: against the kit's Provider with limits
// per model, a 429 for gpt-4o holds the next gpt-4o call until the
// provider has room, and none of gpt-4o-mini's, with KeyByModel as it is
// and wrapped in a function of one's own.
func TestCooldownByModelHoldsOneModel(t *testing.T) {
	for name, key := range map[string]func(*http.Request) string{
		"KeyByModel": KeyByModel,
		"wrapped":    ownKeyByModel,
	} {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			// Retry-After alone: a limit that is not stated (one that is
			// paces the model from its first answer: TestStatedLimitPaces).
			provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Clock: clk, Dialect: retryhttptest.RetryAfterDialect, Models: map[string]retryhttptest.ModelLimits{
				"gpt-4o":      {Requests: retryhttptest.Limit{Rate: 0.1, Size: 1}}, // one at once, then one in 10 s
				"gpt-4o-mini": {Requests: retryhttptest.Limit{Rate: 10, Size: 10}},
			}})
			cd := NewCooldown(key)
			attempts := &ttAttempts{}
			tr := New(provider, WithClock(clk), WithCooldown(cd), WithMaxRetries(0), WithObserver(attempts.observe))
			call := func(model string) (status int, held time.Duration) {
				t.Helper()
				req := newRequest(t, context.Background(), http.MethodPost, openAIChat, []byte(`{"model":"`+model+`","messages":[]}`))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				all := attempts.list()
				return resp.StatusCode, all[len(all)-1].Held
			}

			status, _ := call("gpt-4o")
			require.Equal(t, 200, status)
			status, _ = call("gpt-4o")
			require.Equal(t, 429, status, "gpt-4o's bucket is spent")
			assert.False(t, cd.Until("https://api.openai.com/gpt-4o").IsZero(), "gpt-4o is held")
			assert.True(t, cd.Until("https://api.openai.com/gpt-4o-mini").IsZero(), "gpt-4o-mini is not")
			assert.True(t, cd.Until("https://api.openai.com").IsZero(), "nor the host")
			for range 5 {
				status, held := call("gpt-4o-mini")
				assert.Equal(t, 200, status)
				assert.Zero(t, held, "gpt-4o-mini is not held")
			}
			assert.Empty(t, clk.Waits(), "nothing waited yet")
			status, held := call("gpt-4o")
			assert.Equal(t, 200, status, "held until the provider has room, then admitted")
			assert.InDelta(t, 10*time.Second, held, float64(time.Second), "held for the provider's ask")
			assert.Equal(t, int64(1), provider.ModelStats("gpt-4o").Refused, "gpt-4o's one 429")
			assert.Equal(t, int64(0), provider.ModelStats("gpt-4o-mini").Refused)
			assert.Equal(t, int64(5), provider.ModelStats("gpt-4o-mini").Admitted)
		})
	}
}

// TestCooldownKeyRunsOncePerCall: a key function runs at most once per
// call, and not at all while nothing is watched and the call's answers arm
// nothing: on RoundTrip's fast path, before the first try, when some key
// is watched (the key it made is handed on to the call); else at the
// call's first need of its key (a failed try's hold, an answer that arms
// it). So once per call however many tries, not once per try.
func TestCooldownKeyRunsOncePerCall(t *testing.T) {
	ok, unavailable, limited := reply(200), reply(503), reply(429, "Retry-After", "2")
	observer := []Option{WithObserver(func(context.Context, Attempt) {})}
	for _, tc := range []struct {
		name    string
		watched string // "other" or "own": a key watched before the call
		rs      replies
		opts    []Option
		circuit bool
		want    int
	}{
		{"nothing watched: a success", "", replies{ok}, nil, false, 0},
		{"nothing watched: 503, 200", "", replies{unavailable, ok}, nil, false, 0},
		{"nothing watched: a 429 arms its key, 200", "", replies{limited, ok}, nil, false, 1},
		{"nothing watched: a circuit's failures arm it, 503, 503, 200", "", replies{unavailable, unavailable, ok}, nil, true, 1},
		{"another key watched: a success", "other", replies{ok}, nil, false, 1},
		{"another key watched: 503, 503, 200", "other", replies{unavailable, unavailable, ok}, nil, false, 1},
		{"another key watched: 429, 429, 200", "other", replies{limited, limited, ok}, nil, false, 1},
		{"its key held: 503, 200", "own", replies{unavailable, ok}, nil, false, 1},
		{"its key held, the slow path from the start: 429, 503, 200", "own", replies{limited, unavailable, ok}, observer, false, 1},
		{"another key watched, the slow path from the start: 503, 200", "other", replies{unavailable, ok}, observer, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			var opts []CooldownOption
			if tc.circuit {
				opts = append(opts, WithCircuit(Circuit{Failures: 5}))
			}
			cd := NewCooldown(func(r *http.Request) string { runs++; return r.URL.Host }, opts...)
			clk, script, tr := scripted(tc.rs, append([]Option{WithCooldown(cd)}, tc.opts...)...)
			switch tc.watched {
			case "other":
				holdFor(cd, "other.example.com", clk.Now(), time.Hour)
			case "own":
				holdFor(cd, "api.example.com", clk.Now(), time.Second)
			}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{}`)))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, len(tc.rs), script.Len(), "every try sent")
			assert.Equal(t, tc.want, runs, "key function runs in a call of %d tries", script.Len())
		})
	}
}

// TestKeyByModelReadsOncePerCall: a Cooldown given KeyByModel reads a
// call's body (GetBody's copy) at most once per call, and only while a key
// of the call's host is watched; the retries' own copies are not counted.
func TestKeyByModelReadsOncePerCall(t *testing.T) {
	ok, unavailable, limited := reply(200), reply(503), reply(429, "Retry-After", "2")
	for _, tc := range []struct {
		name    string
		watched string // a key watched before the call
		rs      replies
		want    int
	}{
		{"nothing watched: a success", "", replies{ok}, 0},
		{"nothing watched: 503, 503, 200", "", replies{unavailable, unavailable, ok}, 0},
		{"nothing watched: a 429 arms its key, 200", "", replies{limited, ok}, 1},
		{"another host watched: 429, 200", "https://other.example.com/gpt-4o", replies{limited, ok}, 1},
		{"another host watched: 503, 200", "https://other.example.com/gpt-4o", replies{unavailable, ok}, 0},
		{"another model watched: a success", "https://api.openai.com/o3", replies{ok}, 1},
		{"another model watched: 503, 503, 200", "https://api.openai.com/o3", replies{unavailable, unavailable, ok}, 1},
		{"the host's key watched: a success", "https://api.openai.com", replies{ok}, 1},
		{"its key held: 503, 200", "https://api.openai.com/gpt-4o", replies{unavailable, ok}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(KeyByModel)
			clk, script, tr := scripted(tc.rs, WithCooldown(cd))
			if tc.watched != "" {
				d := time.Hour
				if strings.HasSuffix(tc.watched, "/gpt-4o") && strings.Contains(tc.watched, "openai") {
					d = time.Second
				}
				holdFor(cd, tc.watched, clk.Now(), d)
			}
			req := newRequest(t, context.Background(), http.MethodPost, openAIChat, []byte(`{"model":"gpt-4o"}`))
			copies := 0
			getBody := req.GetBody
			req.GetBody = func() (io.ReadCloser, error) { copies++; return getBody() }
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			retries := script.Len() - 1
			assert.Equal(t, tc.want, copies-retries, "copies read for the key in a call of %d tries", script.Len())
		})
	}
}

// TestTenantsDoNotMeet: with a per-tenant key function, a 429
// Retry-After: 20 to the tenant whose key is 300 bytes holds its calls,
// and not those of the tenant whose own key is the first one's hashed form;
// the other way round too. The default key of a URL whose host makes it
// the hashed form is found as any other.
func TestTenantsDoNotMeet(t *testing.T) {
	long := strings.Repeat("t", 300)
	for _, tc := range []struct{ name, held, other string }{
		{"the long key held", long, hashedFormOf(long)},
		{"the hashed form held", hashedFormOf(long), long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			cd := NewCooldown(func(r *http.Request) string { return r.Header.Get("Tenant") })
			script := retryhttptest.NewScript(reply(429, "Retry-After", "20"), okReply).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
			call := func(tenant string) {
				t.Helper()
				req := getReq(context.Background())
				req.Header.Set("Tenant", tenant)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
			}
			call(tc.held) // 429, Retry-After: 20
			require.Equal(t, clk.Now().Add(20*time.Second), cd.Until(tc.held), "held")
			assert.True(t, cd.Until(tc.other).IsZero(), "the other tenant is not")
			call(tc.other)
			assert.Empty(t, clk.Waits(), "the other tenant's call waits for nothing")
		})
	}
	t.Run("a default key in the hashed form", func(t *testing.T) {
		url := "sha256://" + strings.Repeat("a", hashedLen-len("sha256://"))
		require.Len(t, url, hashedLen)
		cd := NewCooldown(nil)
		req, err := http.NewRequest("GET", url+"/v1", nil)
		require.NoError(t, err)
		key := cd.keyOf(req, nil)
		assert.NotEqual(t, url, key, "hashed")
		e := cd.watch(key, time.Now())
		assert.Same(t, e, cd.find(req), "a call finds its key")
	})
}

// TestMayWatchNeverMissesAWatchedKey: RoundTrip's first look (mayWatch)
// says "maybe" for every request whose key is watched, whatever the key
// function: the default key, a host too long to keep (its key hashed),
// KeyByModel, a key function of the caller's.
func TestMayWatchNeverMissesAWatchedKey(t *testing.T) {
	long := "https://" + strings.Repeat("h", 300) + ".example.com"
	tenant := func(r *http.Request) string { return r.Header.Get("X-Tenant") }
	for _, tc := range []struct {
		name string
		key  func(*http.Request) string
		held string // the key held
		url  string // a request of it
	}{
		{"the default key", nil, "https://api.example.com", "https://api.example.com/v1/chat/completions"},
		{"a host hashed", nil, cooldown.BoundKey(long), long + "/v1/chat/completions"},
		{"KeyByModel", KeyByModel, "https://api.example.com/gpt-4o", "https://api.example.com/v1/chat/completions"},
		{"KeyByModel, Gemini's path", KeyByModel, "https://g.example.com/gemini-2.5-flash", "https://g.example.com/v1beta/models/gemini-2.5-flash:generateContent"},
		{"a key function's", tenant, "tenant-a", "https://x.example.org/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(tc.key)
			defer cd.Close()
			holdFor(cd, tc.held, time.Now(), time.Hour)
			req, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(`{"model":"gpt-4o"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Tenant", "tenant-a")
			watched, _ := cd.watches(req, req.Body)
			if !watched {
				t.Fatalf("%s is not watched for %s", tc.held, tc.url)
			}
			assert.True(t, mayWatch(cd.eng.Watched(), req.URL), "mayWatch said no to a watched key")
		})
	}
}

// hashedFormOf is k's hashed form: "sha256:" and the hex of its SHA-256.
func hashedFormOf(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}
