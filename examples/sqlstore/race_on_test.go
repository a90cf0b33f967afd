//go:build race

package sqlstore_test

import "time"

// bound is the Stores' Bound in the tests: under the race detector,
// modernc.org/sqlite (C translated to Go, every memory access of it
// instrumented) runs an Apply some ten times slower than the default
// bound allows.
const bound = 2 * time.Second
