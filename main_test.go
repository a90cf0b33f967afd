package retryhttp

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a timer,
// a try context or a connection the transport forgot (R13).
func TestMain(m *testing.M) {
	start, err := startOf(os.Getenv("RETRYHTTP_TEST_START"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	testStart = start
	goleak.VerifyTestMain(m)
}

// testStart is where newClock starts: today by default, and, with
// RETRYHTTP_TEST_START set, any instant a clock can give (STYLE.md), which
// .ci/run runs the Cooldown's, the circuit's and the tokens' tests at:
// "epoch" (where clock.NewMock starts), "before" (1901), "far" (2500).
var testStart time.Time

func startOf(name string) (time.Time, error) {
	switch name {
	case "":
		return time.Time{}, nil
	case "epoch":
		return time.Unix(0, 0).UTC(), nil
	case "before":
		return time.Date(1901, 3, 4, 5, 6, 7, 0, time.UTC), nil
	case "far":
		return time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC), nil
	}
	return time.Time{}, fmt.Errorf("RETRYHTTP_TEST_START=%q: want epoch, before or far", name)
}

// newClock is the kit's Clock at testStart (today when it is unset).
func newClock() *retryhttptest.Clock {
	if testStart.IsZero() {
		return retryhttptest.NewClock()
	}
	return retryhttptest.NewClockAt(testStart)
}
