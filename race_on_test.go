//go:build race

package retryhttp

// underRace: the race detector slows every goroutine 2 to 20 times, so the
// real-time bounds of the body tests (R10: 50 ms, 100 ms) get room under it;
// the plain run holds them as written.
const underRace = true
