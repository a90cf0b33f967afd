package retryhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// What a Cooldown key is (R17): by default the request URL's
// scheme://host, lowercased; else what the Cooldown's key function says,
// bounded in length. And how a call finds its key's entry, making the key
// at most once.

// KeyByModel is a key function for NewCooldown, for providers whose limits
// are per model, as OpenAI's and Anthropic's are: the request URL's
// scheme://host, lowercased, then "/" and the model the request asks for
// ("https://api.openai.com/gpt-4o"), so that a 429 for one model holds
// the calls to that model and not those to another model of the same
// host. The model is read where the provider reads it:
//
//   - in the path, as Gemini puts it: the {model} of a last segment
//     models/{model}:{method} (/v1beta/models/{model}:generateContent,
//     :streamGenerateContent, and Vertex AI's
//     .../publishers/google/models/{model}:generateContent);
//   - else in a JSON body, as the OpenAI and Anthropic SDKs put it: its
//     top-level "model" string, as encoding/json reads it. The body is read
//     from a GetBody copy, never from req.Body, at most its first 64 KiB,
//     for at most 40 ms of real time and not past req's context (as
//     EstimateTokens reads it).
//
// A request in which no model is found (no body, no GetBody, GetBody
// failing, a body that is not a JSON object, a model past the first 64
// KiB, a read given up) has the host's key alone, the default key, which
// it shares with every other such request of the host. A request whose URL
// has no host gets "", which leaves it out. The model is kept as it is
// written (not lowercased). KeyByModel never modifies req and never
// panics, whatever GetBody and its copy's Read do.
//
// Given to NewCooldown as it is (not wrapped in a function of one's own),
// it is not called at all: the Cooldown reads the same key itself, at most
// once per call as it would call a key function (NewCooldown says when),
// and reads no body for a host none of its watched keys is of unless the
// call's answer arms one. So a first try to a host no watched key is of
// costs what it costs without a Cooldown (R16: no allocation, no read);
// one to a host that has a watched key goes the transport's slow path, and
// the read of its body allocates (GetBody's copy, and the goroutine that
// bounds the read in real time). Cooldown.Until takes the key as
// KeyByModel writes it.
func KeyByModel(req *http.Request) string {
	if req == nil || req.URL == nil {
		return ""
	}
	var buf [128]byte
	return string(appendModelKey(buf[:0], req))
}

// isKeyByModel reports whether key is KeyByModel itself (a function's code
// pointer: a function value cannot be compared otherwise).
func isKeyByModel(key func(*http.Request) string) bool {
	return key != nil && reflect.ValueOf(key).Pointer() == reflect.ValueOf(KeyByModel).Pointer()
}

// appendModelKey appends req's KeyByModel key to b, which is empty; nil
// when the URL has no host.
func appendModelKey(b []byte, req *http.Request) []byte {
	if b = appendOriginKey(b, req); len(b) == 0 {
		return nil
	}
	if m := pathModel(req.URL.Path); m != "" {
		return append(append(b, '/'), m...)
	}
	origin := len(b)
	if b = appendBodyModel(append(b, '/'), req); len(b) == origin+1 {
		return b[:origin]
	}
	return b
}

// appendBodyModel appends the model of req's JSON body, read from a
// GetBody copy (readCopy), to b.
func appendBodyModel(b []byte, req *http.Request) []byte {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody == nil {
		return b
	}
	readCopy(req, func(body []byte) { b = signal.AppendModel(b, body) })
	return b
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

// originOf is the scheme://host a KeyByModel key starts with: all of it
// when it has no "/" after the host.
func originOf(k string) string {
	i := strings.Index(k, "://")
	if i < 0 {
		return k
	}
	if j := strings.IndexByte(k[i+len("://"):], '/'); j >= 0 {
		return k[:i+len("://")+j]
	}
	return k
}

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

// callKey is a call's key once made: a call makes it at most once, so that
// its key function runs at most once per call (RoundTrip), whatever the
// tries; made is false until then.
type callKey struct {
	key  string
	made bool
}

// watchSet is the watched keys. lens has bit n%64 set for each key n
// bytes long: a call whose origin key has a length no watched key has is
// not watched, known without building its key or hashing it, so that one
// provider limiting the client costs the calls to the others next to
// nothing (R16: 30 ns a call without it). origins, for KeyByModel, holds
// the scheme://host of each key (olens their lengths, as lens), so that a
// call to a host no watched key is of is not watched, known without
// reading its body (hashed: some key is kept by its SHA-256, whose host is
// not known). first is the bits RoundTrip looks at before anything else
// (mayWatch): lens for the default key, olens for KeyByModel, every bit for
// a key function of the caller's or a hashed key.
type watchSet struct {
	m       map[string]*watchedKey
	lens    uint64
	origins map[string]struct{}
	olens   uint64
	hashed  bool
	first   uint64
}

func (c *Cooldown) newWatchSet(m map[string]*watchedKey) *watchSet {
	ws := &watchSet{m: m}
	if c.byModel {
		ws.origins = make(map[string]struct{}, len(m))
	}
	for k := range m {
		ws.lens |= 1 << (len(k) % 64)
		if c.byModel {
			o := originOf(k)
			ws.origins[o] = struct{}{}
			ws.olens |= 1 << (len(o) % 64)
			ws.hashed = ws.hashed || hashedForm(k)
		}
	}
	switch {
	case len(m) == 0:
	case c.byModel && !ws.hashed:
		ws.first = ws.olens
	case c.key == nil:
		ws.first = ws.lens
	default:
		ws.first = ^uint64(0)
	}
	return ws
}

// mayWatch is RoundTrip's first look, inlined: false when no watched key
// can be req's, known from the length of its scheme://host alone. True
// means watches must look.
func (ws *watchSet) mayWatch(u *url.URL) bool {
	n := len(u.Scheme) + len("://") + len(u.Host)
	return n > maxKeyLen || ws.first&(1<<(n%64)) != 0
}

// watches is RoundTrip's look, before a first try, at whether req's key
// may be watched: then the call goes the slow path, to be held or paced.
// With the default key it allocates nothing (findOrigin); with KeyByModel
// it reads nothing and allocates nothing: a key of req's host is watched,
// and the slow path reads the model. Any other key function is called, and
// the key it made is handed on to the call. body is closed if it panics.
func (c *Cooldown) watches(req *http.Request, body io.Closer) (bool, callKey) {
	ws := c.watched.Load()
	switch {
	case ws == nil || len(ws.m) == 0:
		return false, callKey{}
	case c.key == nil:
		return ws.findOrigin(req) != nil, callKey{}
	case c.byModel:
		return ws.hasOrigin(req), callKey{}
	}
	k := c.userKey(req, body)
	return ws.m[k] != nil, callKey{k, true}
}

// entryOf returns the watched entry of the call's key, nil when it is not
// watched or is "". The key is made only when some key is watched (for
// KeyByModel, a key of the request's host), and then once for the call:
// the default key is made on the stack each time (findOrigin), any other
// is kept. body is closed if the key function panics (R1).
func (c *call) entryOf(body io.Closer) *watchedKey {
	cd := c.cfg.cooldown
	if c.key.made {
		if c.key.key == "" {
			return nil
		}
		return cd.entry(c.key.key)
	}
	ws := cd.watched.Load()
	switch {
	case ws == nil || len(ws.m) == 0:
		return nil
	case cd.key == nil:
		return ws.findOrigin(c.req)
	case cd.byModel && !ws.hasOrigin(c.req):
		return nil // its body is not read
	}
	return ws.m[c.keyOf(body)]
}

// keyOf returns the call's key, made once: "" when it is left out. body is
// closed if the key function panics.
func (c *call) keyOf(body io.Closer) string {
	if !c.key.made {
		c.key = callKey{c.cfg.cooldown.keyOf(c.req, body), true}
	}
	return c.key.key
}

// findOrigin returns the watched entry of req's default key, nil when it
// is not watched. It allocates nothing: the key is built on the stack, and
// a map index by string(bytes) does not copy; and it is built only when a
// watched key has its length (lowercasing keeps it).
func (ws *watchSet) findOrigin(req *http.Request) *watchedKey {
	u := req.URL
	n := len(u.Scheme) + len("://") + len(u.Host)
	if n > maxKeyLen {
		n = hashedLen
	}
	if u.Host == "" || ws.lens&(1<<(n%64)) == 0 {
		return nil
	}
	var buf [96]byte
	k := appendOriginKey(buf[:0], req)
	if len(k) > maxKeyLen || hashedForm(k) {
		return ws.m[boundKey(string(k))]
	}
	return ws.m[string(k)]
}

// hasOrigin reports whether a watched KeyByModel key may be of req's
// scheme://host, allocating nothing, and building the host's key only when
// a watched key's host has its length.
func (ws *watchSet) hasOrigin(req *http.Request) bool {
	if req.URL.Host == "" {
		return false // KeyByModel's key is "": left out
	}
	if ws.hashed {
		return true
	}
	u := req.URL
	if ws.olens&(1<<((len(u.Scheme)+len("://")+len(u.Host))%64)) == 0 {
		return false // no watched key's host has its length
	}
	var buf [96]byte
	_, ok := ws.origins[string(appendOriginKey(buf[:0], req))]
	return ok
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
	n := len(b)
	b = append(b, s...)
	for i := n; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}
