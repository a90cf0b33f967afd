package retryhttp

import (
	"net/http"
	"time"
)

// A Cooldown remembers, per key, until when a provider asked clients not to
// come back (R17). Not built yet.
type Cooldown struct {
	key func(*http.Request) string
}

// NewCooldown returns an empty Cooldown keyed by key (nil: scheme://host).
func NewCooldown(key func(*http.Request) string) *Cooldown {
	return &Cooldown{key: key}
}

// Until returns the end of key's cooldown; the zero Time when none.
func (c *Cooldown) Until(key string) time.Time { return time.Time{} }

// WithCooldown makes every call hold while its key is cooling (R17).
func WithCooldown(c *Cooldown) Option {
	return func(cfg *config) {}
}
