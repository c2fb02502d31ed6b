package loadgen

import "time"

// cpuTime returns the process's total CPU time.
func cpuTime() time.Duration {
	u, s := cpuTimes()
	return u + s
}
