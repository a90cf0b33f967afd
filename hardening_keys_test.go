package retryhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, item 9(a): a key longer than 256 bytes is kept as "sha256:" and
// the hex of its SHA-256; a key that has that form itself is hashed too,
// so that no two keys meet (a tenant whose own key was another's hashed
// form shared its hold).

func hashedFormOf(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestHardeningBoundKeyIsInjective: keys of every kind near the bounds map
// to distinct keys, none longer than 256 bytes, and a key in the hashed
// form is never kept as it is.
func TestHardeningBoundKeyIsInjective(t *testing.T) {
	long := strings.Repeat("k", maxKeyLen+1)
	keys := []string{
		"", "tenant-a", strings.Repeat("k", maxKeyLen), long, long + "x",
		hashedFormOf(long), hashedFormOf(long + "x"), hashedFormOf("tenant-a"),
		"sha256:" + strings.Repeat("0", 2*sha256.Size), "sha256:" + strings.Repeat("0", 2*sha256.Size-1),
		"sha256:" + strings.Repeat("0", 2*sha256.Size+1), "SHA256:" + strings.Repeat("0", 2*sha256.Size),
		"https://sha256:" + strings.Repeat("0", 2*sha256.Size-len("https://")),
	}
	seen := map[string]string{}
	for _, k := range keys {
		b := cooldown.BoundKey(k)
		assert.LessOrEqual(t, len(b), maxKeyLen, "%q", k)
		if prev, ok := seen[b]; ok {
			t.Errorf("%q and %q are both kept as %q", prev, k, b)
		}
		seen[b] = k
		if len(k) == hashedLen && strings.HasPrefix(k, "sha256:") {
			assert.NotEqual(t, k, b, "a key in the hashed form is hashed")
		}
	}
}

// TestHardeningTenantsDoNotMeet: with a per-tenant key function, a 429
// Retry-After: 20 to the tenant whose key is 300 bytes holds its calls,
// and not those of the tenant whose own key is the first one's hashed form;
// the other way round too. The default key of a URL whose host makes it
// the hashed form is found as any other.
func TestHardeningTenantsDoNotMeet(t *testing.T) {
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
