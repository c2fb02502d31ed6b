//go:build !race

package bench

// raceEnabled: see race_on_test.go.
const raceEnabled = false
