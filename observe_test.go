package retryhttp

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSafeURL: the one-concatenation form of scheme://host/path is the one
// url.URL writes, for every kind of URL a request is sent to (and for a URL
// with no scheme or no host, which the fast form must leave to url.URL), and
// it never holds the query, fragment or userinfo (R14).
func TestSafeURL(t *testing.T) {
	for _, raw := range []string{
		"https://api.example.com/v1/chat/completions",
		"https://api.example.com",
		"https://api.example.com/",
		"http://127.0.0.1:8080/v1?key=secret#frag",
		"https://bob:hunter2@api.example.com/v1/models/gemini:generateContent?alt=sse",
		"https://[::1]:443/v1",
		"https://api.example.com/a%2Fb/c d",
		"https://api.example.com/caf%C3%A9/%E2%82%AC",
		"https://api.example.com/path;params",
		"HTTPS://API.EXAMPLE.COM/V1",
		"//api.example.com/v1", // no scheme
		"https:",               // no host, no path
		"https:///v1",          // no host
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err, raw)
		want := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
		got := safeURL(u)
		assert.Equal(t, want, got, raw)
		assert.NotContains(t, got, "secret")
		assert.NotContains(t, got, "hunter2")
		assert.NotContains(t, got, "frag")
	}
	assert.Equal(t, "", safeURL(nil))
	assert.Equal(t, "/relative", safeURL(&url.URL{Path: "/relative", RawQuery: "key=x"}))
}
