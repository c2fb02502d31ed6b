package loadgen

import (
	"context"
	"fmt"
	"time"
)

// sample records the timeline and prints progress until ctx ends.
func (r *runner) sample(ctx context.Context) {
	const tick = 250 * time.Millisecond
	r.sampleEvery.Store(int64(tick))
	t := time.NewTicker(tick)
	defer t.Stop()
	lastSample, lastPrint := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(lastSample) >= time.Duration(r.sampleEvery.Load())-tick/2 {
				r.addSample()
				lastSample = now
			}
			if r.cfg.Progress != nil && now.Sub(lastPrint) >= r.cfg.ProgressInterval-tick/2 {
				r.progress(false)
				lastPrint = now
			}
		}
	}
}

// addSample appends a timeline sample, halving the resolution when the
// timeline grows past 2,000 samples.
func (r *runner) addSample() {
	responses, bytes := r.totals()
	s := Sample{
		AtMS:       ms(time.Since(r.start)),
		Launched:   int(r.launched.Load()),
		Connected:  int(r.connectedNow.Load()),
		FullConfig: int(r.fullCount.Load()),
		Responses:  responses,
		Bytes:      bytes,
		NACKs:      r.nacks(),
		Nacking:    int(r.nackingNow.Load()),
		Stalled:    int(r.stalledNow.Load()),
		CPUSeconds: (cpuTime() - r.userAtStart - r.sysAtStart).Seconds(),
		RSSBytes:   currentRSS(),
	}
	r.timelineMu.Lock()
	defer r.timelineMu.Unlock()
	r.timeline = append(r.timeline, s)
	if len(r.timeline) > 2000 {
		kept := r.timeline[:0]
		for i, s := range r.timeline {
			if i%2 == 0 || i == len(r.timeline)-1 {
				kept = append(kept, s)
			}
		}
		r.timeline = kept
		r.sampleEvery.Store(2 * r.sampleEvery.Load())
	}
}

// progress writes the progress line; final ends it.
func (r *runner) progress(final bool) {
	w := r.cfg.Progress
	if w == nil {
		return
	}
	responses, bytes := r.totals()
	line := fmt.Sprintf("loadgen %6.1fs  launched %d  connected %d  full config %d/%d  pending %d  responses %d  %s",
		time.Since(r.start).Seconds(), r.launched.Load(), r.connectedNow.Load(), r.fullCount.Load(), r.cfg.Proxies,
		r.launched.Load()-r.fullCount.Load(), responses, fmtBytes(bytes))
	if nacks := r.nacks(); nacks > 0 {
		line += fmt.Sprintf("  nacks %d", nacks)
	}
	if e := r.connectErrors.Load() + r.streamErrors.Load() + r.decodeErrors.Load(); e > 0 {
		line += fmt.Sprintf("  errors %d", e)
	}
	if ch := r.change.Load(); ch != nil {
		line += fmt.Sprintf("  change %d: converged %d/%d", ch.index, ch.count.Load(), ch.n)
	}
	if r.cfg.ProgressTTY {
		fmt.Fprint(w, "\r\x1b[K"+line)
		if final {
			fmt.Fprintln(w)
		}
		return
	}
	fmt.Fprintln(w, line)
}

func (r *runner) nacks() int64 {
	var n int64
	for t := range r.types {
		n += r.types[t].nacks.Load()
	}
	return n
}
