package retryhttp

import (
	crand "crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
)

// needsIdempotencyKey reports whether R11 gives req a key: a method that is
// not idempotent by definition, and no key of the caller's own.
func needsIdempotencyKey(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return false
	}
	for name, values := range req.Header {
		// Any spelling: a key set as header["idempotency-key"] is still the caller's.
		if len(values) > 0 && strings.EqualFold(name, "Idempotency-Key") {
			return false
		}
	}
	return true
}

// withIdempotencyKey returns a clone of req with a random Idempotency-Key,
// made once per call and sent with every try of it (R11).
func withIdempotencyKey(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	var key [16]byte
	_, _ = crand.Read(key[:]) // never fails on supported platforms (Go 1.24+ crashes instead)
	r.Header.Set("Idempotency-Key", hex.EncodeToString(key[:]))
	return r
}
