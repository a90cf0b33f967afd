package retryredis

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParseMessageLength: the key's length in a message is a uint as
// store's grammar spells one, as apply.lua writes it: not "+1", not "01".
func TestParseMessageLength(t *testing.T) {
	const reply = " 1 0 1 0 0 0 0 0 r4 5 0 0 0 0 0 0 0 0"
	for n, ok := range map[string]bool{"1:k": true, "+1:k": false, "01:k": false, "-0:": false, "0x1:k": false} {
		_, key, _, err := parseMessage("abc " + n + reply)
		assert.Equal(t, ok, err == nil, "%q: %v", n, err)
		if ok {
			assert.Equal(t, "k", key)
		}
	}
}
