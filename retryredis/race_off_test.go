//go:build !race

package retryredis

const raceOn = false
