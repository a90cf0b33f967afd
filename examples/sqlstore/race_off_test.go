//go:build !race

package sqlstore_test

import "time"

// bound is the Stores' Bound in the tests: 0, the default.
const bound time.Duration = 0
