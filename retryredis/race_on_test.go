//go:build race

package retryredis

// raceOn: the race detector slows the kit's random sequences some
// tenfold; a run under it applies fewer (diffSequences).
const raceOn = true
