//go:build !race

package loadgen

// raceEnabled: see race_on_test.go.
const raceEnabled = false
