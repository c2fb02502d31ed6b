//go:build !unix

package loadgen

import "time"

func cpuTimes() (user, sys time.Duration) { return 0, 0 }
func maxRSS() int64                       { return 0 }
func currentRSS() int64                   { return 0 }
