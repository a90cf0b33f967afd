package cooldown

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/retryhttp/retryhttp/store"
)

// What a key's name may be: any bytes, bounded. A key longer than
// MaxKeyLen, or with the form of a hash, is kept by its SHA-256, so that
// 4096 keys of 64 KiB (288 MiB once) cost what 4096 short ones do, and no
// key is kept as another's hash (a tenant whose own key was another's
// hashed form shared its hold).
const (
	MaxKeyLen  = store.MaxKeyLen
	hashPrefix = "sha256:"
	hashedLen  = len(hashPrefix) + 2*sha256.Size
)

// BoundKey returns k, or its SHA-256 when it is longer than MaxKeyLen or
// has the form of one.
func BoundKey(k string) string {
	if len(k) <= MaxKeyLen && !HashedForm(k) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// HashedForm reports whether k has the form of a key kept by its SHA-256.
func HashedForm[S string | []byte](k S) bool {
	return len(k) == hashedLen && string(k[:len(hashPrefix)]) == hashPrefix
}

// HashedLen is the length of a hashed key.
const HashedLen = hashedLen

// OriginOf is the scheme://host a model key starts with: all of it when it
// has no "/" after the host.
func OriginOf(k string) string {
	i := strings.Index(k, "://")
	if i < 0 {
		return k
	}
	if j := strings.IndexByte(k[i+len("://"):], '/'); j >= 0 {
		return k[:i+len("://")+j]
	}
	return k
}

// logKey is key as a log may hold it: a key the library made (the default
// scheme://host, KeyByModel's scheme://host/model) as it is: it holds no
// secret, and an operator must tell which model a line is about; one the
// caller's key function made (which may hold an API key) as the first 8
// bytes of its SHA-256, in hex.
func (e *Engine) logKey(key string) string {
	if e.keys != CallerKeys {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:8])
}

// LogKey is key as the engine logs it (logKey), for the retry loop's own
// log lines.
func (e *Engine) LogKey(key string) string { return e.logKey(key) }
