package engine

import (
	"context"
	"runtime/pprof"
	"time"
)

// Run debounces index changes and pushes them until ctx ends. Debouncing
// follows istiod: a push happens once DebounceAfter has passed without a new
// change, or DebounceMax after the first one; endpoint-only changes skip the
// wait when EDS debouncing is disabled.
func (e *Engine) Run(ctx context.Context) {
	pprof.Do(ctx, pprof.Labels("pilotfish", "engine-run"), func(ctx context.Context) {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				e.shutdown()
				return
			case <-e.changes.wake:
			case <-timer.C:
			}
			events, first, last, full := e.changes.peek()
			if events == 0 {
				continue
			}
			now := time.Now()
			quiet := now.Sub(last)
			due := quiet >= e.opts.DebounceAfter || now.Sub(first) >= e.opts.DebounceMax ||
				(!full && e.opts.DisableEDSDebounce)
			if !due {
				wait := e.opts.DebounceAfter - quiet
				if untilMax := e.opts.DebounceMax - now.Sub(first); untilMax < wait {
					wait = untilMax
				}
				timer.Reset(wait)
				continue
			}
			p := e.changes.take()
			e.metrics.Debounced(now.Sub(p.first), !p.full)
			e.push(p)
		}
	})
}

// shutdown refuses new connections; streams end with their contexts.
func (e *Engine) shutdown() {
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
}
