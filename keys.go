package retryhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
)

// What a Cooldown key is (R17): by default the request URL's
// scheme://host, lowercased; else what the Cooldown's key function says,
// bounded in length.

// keyOf returns the key of req, or "" when req is left out.
func (c *Cooldown) keyOf(req *http.Request, body io.Closer) string {
	if c.key != nil {
		return c.userKey(req, body)
	}
	return boundKey(string(appendOriginKey(nil, req)))
}

// userKey calls the key function, closing body before a panic of it goes
// on up, and bounds what it returns.
func (c *Cooldown) userKey(req *http.Request, body io.Closer) string {
	defer func() {
		if v := recover(); v != nil {
			if body != nil {
				_ = body.Close()
			}
			panic(v)
		}
	}()
	return boundKey(c.key(req))
}

// boundKey returns k, or its SHA-256 when it is longer than maxKeyLen or
// has the form of one ("sha256:" and 64 characters): so that no key is
// kept as another's hash (a tenant whose own key was another's
// hashed form shared its hold), and no two keys meet.
func boundKey(k string) string {
	if len(k) <= maxKeyLen && !hashedForm(k) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// hashedForm reports whether k has the form of a key kept by its SHA-256.
func hashedForm[S string | []byte](k S) bool {
	return len(k) == hashedLen && string(k[:len(hashPrefix)]) == hashPrefix
}

const hashPrefix = "sha256:"

// appendOriginKey appends req's scheme://host, lowercased, to b; nil when
// the URL has no host.
func appendOriginKey(b []byte, req *http.Request) []byte {
	u := req.URL
	if u.Host == "" {
		return nil
	}
	b = appendLower(b, u.Scheme)
	b = append(b, "://"...)
	return appendLower(b, u.Host)
}

func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}
