//go:build !race

package serve_test

// raceEnabled: see ads_race_test.go.
const raceEnabled = false
