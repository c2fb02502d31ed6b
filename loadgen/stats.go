package loadgen

import (
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
)

// typeCounters are a run's counters for one resource type, updated by every
// proxy with atomics.
type typeCounters struct {
	responses atomic.Int64
	bytes     atomic.Int64
	resources atomic.Int64
	acks      atomic.Int64
	nacks     atomic.Int64
	invalid   atomic.Int64
	latency   hist // subscription request → first response
}

// hist is a lock-free log-linear histogram of durations: values in
// microseconds, 16 buckets per power of two, so a percentile read from it is
// within ~3% of the true value. Recording is one atomic add.
type hist struct {
	counts [histBuckets]atomic.Int64
}

const (
	histSub     = 16
	histBuckets = 60 * histSub // up to 1<<63 µs
)

func histIndex(us uint64) int {
	if us < histSub {
		return int(us)
	}
	e := bits.Len64(us) - 5 // keep the top 5 bits: a mantissa in [16, 32)
	return (e+1)*histSub + int(us>>e) - histSub
}

// histValue is the middle of bucket i, in microseconds.
func histValue(i int) float64 {
	if i < histSub {
		return float64(i)
	}
	e := i/histSub - 1
	m := i%histSub + histSub
	lo := float64(uint64(m) << e)
	return lo + float64(uint64(1)<<e)/2
}

func (h *hist) record(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.counts[histIndex(uint64(us))].Add(1)
}

// latency summarises the histogram.
func (h *hist) latency() Latency {
	var counts [histBuckets]int64
	var n int64
	for i := range counts {
		counts[i] = h.counts[i].Load()
		n += counts[i]
	}
	if n == 0 {
		return Latency{}
	}
	at := func(q float64) float64 {
		rank := int64(math.Ceil(q / 100 * float64(n)))
		rank = max(rank, 1)
		var seen int64
		for i, c := range counts {
			seen += c
			if seen >= rank {
				return histValue(i) / 1e3
			}
		}
		return 0
	}
	var sum float64
	for i, c := range counts {
		sum += float64(c) * histValue(i)
	}
	l := Latency{Count: int(n), MinMS: at(0), MeanMS: sum / float64(n) / 1e3,
		P50MS: at(50), P90MS: at(90), P99MS: at(99), MaxMS: at(100)}
	l.CDFMS = make([]float64, 101)
	for q := range l.CDFMS {
		l.CDFMS[q] = at(float64(q))
	}
	return l
}

// latencyOf summarises exact samples (sorted in place).
func latencyOf(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	n := len(samples)
	at := func(q float64) float64 {
		i := int(math.Ceil(q/100*float64(n))) - 1
		i = min(max(i, 0), n-1)
		return ms(samples[i])
	}
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	l := Latency{Count: n, MinMS: ms(samples[0]), MeanMS: ms(sum / time.Duration(n)),
		P50MS: at(50), P90MS: at(90), P99MS: at(99), MaxMS: ms(samples[n-1])}
	l.CDFMS = make([]float64, 101)
	for q := range l.CDFMS {
		l.CDFMS[q] = at(float64(q))
	}
	return l
}

// ms is d in milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}
