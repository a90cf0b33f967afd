module github.com/retryhttp/retryhttp/bench

go 1.26.0

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/retryhttp/retryhttp v0.0.0-20261203164944-e59ad4754833
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/redis/go-redis/v9 v9.23.0
	github.com/retryhttp/retryhttp/retryredis v0.0.0-20261203164944-e59ad4754833
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
