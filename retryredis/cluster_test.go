package retryredis

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/store"
	"github.com/retryhttp/retryhttp/store/storetest"
	"github.com/stretchr/testify/require"
)

// A real Redis Cluster (R24: "every script touches one key, so Redis
// Cluster works"): three masters started by the test, each redis-server
// --cluster-enabled on a free port of 127.0.0.1 (and its bus port, 10000
// above), joined by redis-cli --cluster create; then the conformance kit,
// pub/sub included, on a ClusterClient. The Store's keys, its index and its
// channel hash to different slots, on different nodes.

// cluster starts three masters and returns their addresses.
func cluster(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli not installed (Debian's redis-server package has it)")
	}
	var addrs []string
	for range 3 {
		s := &redisServer{t: t, dir: t.TempDir()}
		for try := 0; ; try++ {
			s.port = freeClusterPort(t)
			s.addr = "127.0.0.1:" + strconv.Itoa(s.port)
			if s.startWith("--cluster-enabled", "yes", "--cluster-config-file", s.dir+"/nodes.conf", "--cluster-node-timeout", "2000") {
				break
			}
			require.Less(t, try, 3, "redis-server did not start")
		}
		t.Cleanup(s.kill)
		addrs = append(addrs, s.addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	out, err := exec.Command("redis-cli", append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	require.Eventually(t, func() bool {
		info, err := c.ClusterInfo(context.Background()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 10*time.Second, 50*time.Millisecond, "the cluster is up")
	return addrs
}

// freeClusterPort is a free port whose bus port (10000 above) is free too.
func freeClusterPort(t *testing.T) int {
	for {
		p := freePort(t)
		if p+10000 < 65536 && portFree(p+10000) {
			return p
		}
	}
}

func TestCluster(t *testing.T) {
	if os.Getenv("REDIS_ADDR") != "" {
		t.Skip("REDIS_ADDR: this test starts a cluster of its own")
	}
	addrs := cluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	prefix := testPrefix(t)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			return newStore(t, c, WithPrefix(prefix), WithTimeout(5*time.Second))
		},
		Plant: func(t *testing.T, key string, b []byte) {
			require.NoError(t, c.Set(context.Background(), prefix+"key:"+key, b, time.Minute).Err())
		},
		Sequences: diffSequences(t, 500),
		Parallel:  4,
	})
}
