package retryhttp

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a timer,
// a try context or a connection the transport forgot (R13).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
