package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/stretchr/testify/assert"
)

// TestEstimateTokensUnknownLength: a body whose length is not known
// (ContentLength 0 with a body, as a request built around a reader of its
// own has) is measured from its GetBody copy.
func TestEstimateTokensUnknownLength(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}],"max_tokens":50}`
	req, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", io.NopCloser(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 0
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(body))), nil }
	assert.Equal(t, int64((len(body)+3)/4+50), EstimateTokens(req))
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
