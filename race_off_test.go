//go:build !race

package retryhttp

// underRace: see race_on_test.go.
const underRace = false
