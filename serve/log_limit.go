package serve

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// refusalLogBurst is how many refused-client lines are logged per
// refusalLogInterval; a flood of refused clients (a misconfigured fleet, a
// scanner with a foreign certificate) costs a bounded number of log lines,
// and what was left out is counted in the next line. The metrics count
// every refusal.
const (
	refusalLogBurst    = 10
	refusalLogInterval = time.Second
)

// logLimiter passes at most burst lines per interval.
type logLimiter struct {
	burst    int
	interval time.Duration

	mu         sync.Mutex
	start      time.Time // guarded by mu: the current interval's
	passed     int       // guarded by mu: lines in the current interval
	suppressed int       // guarded by mu: lines dropped since the last one logged
}

func newRefusalLimiter() *logLimiter {
	return &logLimiter{burst: refusalLogBurst, interval: refusalLogInterval}
}

// allow reports whether a line may be logged at now, and how many were
// dropped since the last one that was.
func (l *logLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= l.interval {
		l.start, l.passed = now, 0
	}
	if l.passed >= l.burst {
		l.suppressed++
		return false, 0
	}
	l.passed++
	dropped, l.suppressed = l.suppressed, 0
	return true, dropped
}

// warn logs msg at Warn through l, with "suppressed" set when lines were
// dropped before it.
func (l *logLimiter) warn(log *slog.Logger, msg string, args ...any) {
	ok, dropped := l.allow(time.Now())
	if !ok {
		return
	}
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	log.Log(context.Background(), slog.LevelWarn, msg, args...)
}
