//go:build !unix

package bench

import "time"

func cpuTime() time.Duration { return 0 }
func currentRSS() int64      { return 0 }
func loadAverage() string    { return "" }
