package cooldown

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A key longer than 256 bytes is kept as "sha256:" and
// the hex of its SHA-256; a key that has that form itself is hashed too,
// so that no two keys meet (a tenant whose own key was another's hashed
// form shared its hold).

func hashedFormOf(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestBoundKeyIsInjective: keys of every kind near the bounds map
// to distinct keys, none longer than 256 bytes, and a key in the hashed
// form is never kept as it is.
func TestBoundKeyIsInjective(t *testing.T) {
	long := strings.Repeat("k", MaxKeyLen+1)
	keys := []string{
		"", "tenant-a", strings.Repeat("k", MaxKeyLen), long, long + "x",
		hashedFormOf(long), hashedFormOf(long + "x"), hashedFormOf("tenant-a"),
		"sha256:" + strings.Repeat("0", 2*sha256.Size), "sha256:" + strings.Repeat("0", 2*sha256.Size-1),
		"sha256:" + strings.Repeat("0", 2*sha256.Size+1), "SHA256:" + strings.Repeat("0", 2*sha256.Size),
		"https://sha256:" + strings.Repeat("0", 2*sha256.Size-len("https://")),
	}
	seen := map[string]string{}
	for _, k := range keys {
		b := BoundKey(k)
		assert.LessOrEqual(t, len(b), MaxKeyLen, "%q", k)
		if prev, ok := seen[b]; ok {
			t.Errorf("%q and %q are both kept as %q", prev, k, b)
		}
		seen[b] = k
		if len(k) == hashedLen && strings.HasPrefix(k, "sha256:") {
			assert.NotEqual(t, k, b, "a key in the hashed form is hashed")
		}
	}
}

// TestBoundKeyAtTheBound: a key of MaxKeyLen bytes or fewer, not in the
// hashed form, is kept as it is; a byte more and it is hashed.
func TestBoundKeyAtTheBound(t *testing.T) {
	for _, n := range []int{0, 1, MaxKeyLen - 1, MaxKeyLen} {
		k := strings.Repeat("k", n)
		assert.Equal(t, k, BoundKey(k), "%d bytes", n)
	}
	long := strings.Repeat("k", MaxKeyLen+1)
	assert.Equal(t, hashedFormOf(long), BoundKey(long))
}

// TestOriginOf: a model key's scheme://host, the part before the first
// "/" after "://", whatever the scheme and host hold, empty ones too; all
// of the key when it has no such "/" or no "://".
func TestOriginOf(t *testing.T) {
	for k, want := range map[string]string{
		"https://api.example/v1/m": "https://api.example",
		"https://api.example":      "https://api.example",
		"https:///m":               "https://",
		"://h/m":                   "://h",
		":///m":                    "://",
		"no-scheme/m":              "no-scheme/m",
	} {
		assert.Equal(t, want, OriginOf(k), "%q", k)
	}
}
