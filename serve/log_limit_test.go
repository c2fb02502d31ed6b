package serve

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogLimiter: at most burst lines an interval; the first line of the
// next interval says how many were dropped.
func TestLogLimiter(t *testing.T) {
	l := &logLimiter{burst: 3, interval: time.Second}
	t0 := time.Unix(1000, 0)
	passed := 0
	for i := range 100 {
		if ok, _ := l.allow(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			passed++
		}
	}
	if passed != 3 {
		t.Fatalf("%d lines passed in one interval, want 3", passed)
	}
	ok, dropped := l.allow(t0.Add(time.Second))
	if !ok || dropped != 97 {
		t.Fatalf("next interval: ok %v, dropped %d; want true, 97", ok, dropped)
	}
	if _, dropped := l.allow(t0.Add(time.Second + time.Millisecond)); dropped != 0 {
		t.Fatalf("dropped counted twice: %d", dropped)
	}

	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	l = newRefusalLimiter()
	for range 1000 {
		l.warn(log, "refused", "peer", "x")
	}
	if n := strings.Count(buf.String(), "refused"); n < 1 || n > 2*refusalLogBurst {
		t.Fatalf("%d lines for 1000 refusals in a burst, want at most %d", n, 2*refusalLogBurst)
	}
}
