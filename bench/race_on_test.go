//go:build race

package bench

// raceEnabled: the race detector makes sync.Pool drop items at random and
// slows everything down, so allocation budgets and ratio floors are not
// measurable under it.
const raceEnabled = true
