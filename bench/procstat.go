package bench

import (
	"runtime"
	"runtime/debug"
	"time"
)

// procSample is this process's resource use at one moment.
type procSample struct {
	at         time.Time
	cpu        time.Duration // user + system, since the process started
	mallocs    uint64        // heap objects allocated, cumulative
	heap       uint64        // HeapAlloc: live heap right after a GC
	stack      uint64        // StackInuse: goroutine stacks
	rss        int64         // resident set size; 0 where unknown
	goroutines int
}

// sample reads the process's counters without disturbing it much (one
// short stop of the world for ReadMemStats).
func sample() procSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return procSample{
		at:         time.Now(),
		cpu:        cpuTime(),
		mallocs:    ms.Mallocs,
		heap:       ms.HeapAlloc,
		stack:      ms.StackInuse,
		rss:        currentRSS(),
		goroutines: runtime.NumGoroutine(),
	}
}

// settledSample collects garbage (twice, so sync.Pool victims go too),
// returns free pages to the OS and then samples: heap is the live heap and
// rss what the process really holds.
func settledSample() procSample {
	runtime.GC()
	debug.FreeOSMemory()
	return sample()
}

// perProxy is (b-a)/n for a counter, negative when it shrank.
func perProxy(a, b uint64, n int) float64 {
	return (float64(b) - float64(a)) / float64(n)
}
