//go:build unix

package rules

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used:
// benchmarks report it per operation, a figure a busy shared machine
// disturbs much less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
