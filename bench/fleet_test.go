package bench

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFleet: four replicas, each with its own Cooldown, against one
// provider, on their own and sharing one real Redis (a redis-server the
// test starts): sharing, they send fewer requests per success, and no call
// fails either way.
func TestFleet(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (apt-get install -y redis-server; .ci/run installs it)")
	}
	addr, stop, err := StartRedis()
	require.NoError(t, err)
	defer stop()
	f := &Fleet{Addr: addr}
	defer func() { require.NoError(t, f.Reset()) }()
	cfg := DefaultGoodput
	cfg.Calls, cfg.Workers, cfg.Replicas = 300, 16, 4
	own := Goodput(RetryHTTPCooldownRetries10, cfg)
	require.NoError(t, f.Reset())
	shared := Goodput(f.Lib(), cfg)
	t.Logf("4 replicas: %.2f requests per success on their own, %.2f sharing a Store", own.RequestsPerSuccess(), shared.RequestsPerSuccess())
	assert.Equal(t, 300, own.OK)
	assert.Equal(t, 300, shared.OK)
	assert.Less(t, shared.RequestsPerSuccess(), own.RequestsPerSuccess())
}
