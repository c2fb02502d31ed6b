//go:build race

package loadgen

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation budgets are not measurable under it.
const raceEnabled = true
