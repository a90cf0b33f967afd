package retryhttp

import (
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/signal"
)

// What a Cooldown key is (R17): by default the request URL's
// scheme://host, lowercased; else what the Cooldown's key function says,
// bounded in length. And how a call finds its key's entry, making the key
// at most once.

// KeyByModel is a key function for NewCooldown, for providers whose limits
// are per model, as OpenAI's and Anthropic's are: the request URL's
// scheme://host, lowercased, then "/" and the model the request asks for
// ("https://api.openai.com/gpt-4o"), so that a 429 for one model holds the
// calls to that model only. The model is read from Gemini's path
// (models/{model}:{method}) or a JSON body's top-level "model", from a
// GetBody copy (its first 64 KiB, for at most 40 ms, never req.Body); a
// request in which none is found has the host's key. A request whose URL
// has no host gets "", which leaves it out. It never modifies req and
// never panics. Given to NewCooldown as it is, it is not called: the
// Cooldown reads the same key itself, and reads no body for a host none of
// its watched keys is of (R16). Until takes the key as KeyByModel writes
// it. The rules: RULES.md R17.
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

// keyOf returns the key of req, or "" when req is left out.
func (c *Cooldown) keyOf(req *http.Request, body io.Closer) string {
	if c.key != nil {
		return c.userKey(req, body)
	}
	return cooldown.BoundKey(string(appendOriginKey(nil, req)))
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
	return cooldown.BoundKey(c.key(req))
}

// callKey is a call's key once made: a call makes it at most once, so that
// its key function runs at most once per call (RoundTrip), whatever the
// tries; made is false until then.
type callKey struct {
	key  string
	made bool
}

// mayWatch is RoundTrip's first look, inlined: false when no watched key
// can be req's, known from the length of its scheme://host alone
// (cooldown.WatchSet.MayWatch).
func mayWatch(ws *cooldown.WatchSet, u *url.URL) bool {
	return ws.MayWatch(len(u.Scheme) + len("://") + len(u.Host))
}

// watches is RoundTrip's look, before a first try, at whether req's key
// may be watched: then the call goes the slow path, to be held or paced.
// With the default key it allocates nothing (findOrigin); with KeyByModel
// it reads nothing and allocates nothing: a key of req's host is watched,
// and the slow path reads the model. Any other key function is called, and
// the key it made is handed on to the call. body is closed if it panics.
func (c *Cooldown) watches(req *http.Request, body io.Closer) (bool, callKey) {
	ws := c.eng.Watched()
	switch {
	case ws == nil || ws.Len() == 0:
		return false, callKey{}
	case c.key == nil:
		return findOrigin(ws, req) != nil, callKey{}
	case c.byModel:
		return hasOrigin(ws, req), callKey{}
	}
	k := c.userKey(req, body)
	return ws.Find(k) != nil, callKey{k, true}
}

// keyState returns the watched state of the call's key, nil when it is
// not watched or is "". The key is made only when some key is watched (for
// KeyByModel, a key of the request's host), and then once for the call:
// the default key is made on the stack each time (findOrigin), any other
// is kept. body is closed if the key function panics (R1).
func (c *call) keyState(body io.Closer) *cooldown.KeyState {
	cd := c.cfg.cooldown
	if c.key.made {
		if c.key.key == "" {
			return nil
		}
		return cd.eng.Find(c.key.key)
	}
	ws := cd.eng.Watched()
	switch {
	case ws == nil || ws.Len() == 0:
		return nil
	case cd.key == nil:
		return findOrigin(ws, c.req)
	case cd.byModel && !hasOrigin(ws, c.req):
		return nil // its body is not read
	}
	return ws.Find(c.keyOf(body))
}

// keyOf returns the call's key, made once: "" when it is left out. body is
// closed if the key function panics.
func (c *call) keyOf(body io.Closer) string {
	if !c.key.made {
		c.key = callKey{c.cfg.cooldown.keyOf(c.req, body), true}
	}
	return c.key.key
}

// findOrigin returns the watched state of req's default key, nil when it
// is not watched. It allocates nothing: the key is built on the stack, and
// a map index by string(bytes) does not copy; and it is built only when a
// watched key has its length (lowercasing keeps it).
func findOrigin(ws *cooldown.WatchSet, req *http.Request) *cooldown.KeyState {
	u := req.URL
	n := len(u.Scheme) + len("://") + len(u.Host)
	if n > cooldown.MaxKeyLen {
		n = cooldown.HashedLen
	}
	if u.Host == "" || !ws.HasLen(n) {
		return nil
	}
	var buf [96]byte
	k := appendOriginKey(buf[:0], req)
	if len(k) > cooldown.MaxKeyLen || cooldown.HashedForm(k) {
		return ws.Find(cooldown.BoundKey(string(k)))
	}
	return ws.Lookup(k)
}

// hasOrigin reports whether a watched KeyByModel key may be of req's
// scheme://host, allocating nothing, and building the host's key only when
// a watched key's host has its length.
func hasOrigin(ws *cooldown.WatchSet, req *http.Request) bool {
	if req.URL.Host == "" {
		return false // KeyByModel's key is "": left out
	}
	if ws.Hashed() {
		return true
	}
	u := req.URL
	if !ws.HasOriginLen(len(u.Scheme) + len("://") + len(u.Host)) {
		return false // no watched key's host has its length
	}
	var buf [96]byte
	return ws.HasOrigin(appendOriginKey(buf[:0], req))
}

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
