//go:build !unix

package rules

import "time"

// processCPU is unavailable here: benchmarks report 0 CPU per operation.
func processCPU() time.Duration { return 0 }
