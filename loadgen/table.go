package loadgen

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the report as text tables for a terminal.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "loadgen: %d %s proxies (%s, %s decode) → %s over %d connection(s)\n",
		r.Proxies, r.ProxyType, r.Mode, r.Decode, r.Target, r.Connections)
	status := "complete"
	if !r.Complete {
		status = "INCOMPLETE"
	}
	fmt.Fprintf(&b, "elapsed %s, %s: launched %d, connected %d, full config %d",
		fmtMS(r.ElapsedMS), status, r.Launched, r.Connected, r.FullConfig)
	if r.AllFullConfigMS > 0 {
		fmt.Fprintf(&b, " (all by %s)", fmtMS(r.AllFullConfigMS))
	}
	b.WriteString("\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency\tcount\tmin\tp50\tp90\tp99\tmax\t")
	latencyRow(tw, "time to full config", r.TimeToFullConfig)
	for _, c := range r.Changes {
		name := fmt.Sprintf("change %d convergence", c.Index)
		latencyRow(tw, name, c.Convergence)
	}
	for _, t := range r.Types {
		if t.ResponseLatency.Count > 0 {
			latencyRow(tw, t.Type+" response", t.ResponseLatency)
		}
	}
	tw.Flush()
	b.WriteString("\n")

	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tresponses\tresources\tbytes\tacks\tnacks\tinvalid\theld/proxy\t")
	var tot TypeStats
	for _, t := range r.Types {
		if t.Type == "other" && t.Responses == 0 {
			continue
		}
		held := fmt.Sprint(t.HeldMin)
		if t.HeldMax != t.HeldMin {
			held = fmt.Sprintf("%d–%d", t.HeldMin, t.HeldMax)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t\n", t.Type, t.Responses, t.Resources, fmtBytes(t.Bytes),
			t.ACKs, t.NACKs, t.Invalid, held)
		tot.Responses += t.Responses
		tot.Resources += t.Resources
		tot.Bytes += t.Bytes
		tot.ACKs += t.ACKs
		tot.Invalid += t.Invalid
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%s\t%d\t%d\t%d\t\t\n", tot.Responses, tot.Resources, fmtBytes(tot.Bytes),
		tot.ACKs, r.NACKs.Total, tot.Invalid)
	tw.Flush()
	if r.Proxies > 0 {
		fmt.Fprintf(&b, "\nto full config: %s received, %s per proxy\n",
			fmtBytes(r.BytesToFullConfig), fmtBytes(r.BytesToFullConfig/int64(r.Proxies)))
	}

	for _, c := range r.Changes {
		what := c.Expect
		if what == "" {
			what = "any version bump"
		}
		fmt.Fprintf(&b, "change %d at %s (%s): converged on %d/%d",
			c.Index, fmtMS(c.AtMS), what, c.Converged, c.Converged+c.NotConverged)
		if c.Convergence.Count > 0 {
			fmt.Fprintf(&b, ", p50 %s p99 %s max %s", fmtMS(c.Convergence.P50MS), fmtMS(c.Convergence.P99MS),
				fmtMS(c.Convergence.MaxMS))
		}
		fmt.Fprintf(&b, "; %d responses, %s", c.Responses, fmtBytes(c.Bytes))
		if f := r.Faults; f != nil && f.Nacking > 0 {
			fmt.Fprintf(&b, "; %d to the NACKing proxies (%.1f each)", c.NackingReceived, float64(c.NackingReceived)/float64(f.Nacking))
		}
		b.WriteString("\n")
		if c.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", c.Error)
		}
	}

	if r.NACKs.Total > 0 || r.NackRate > 0 {
		fmt.Fprintf(&b, "NACKs: %d (%s)\n", r.NACKs.Total, strings.Join(nackParts(r), ", "))
	}
	if f := r.Faults; f != nil {
		fmt.Fprintf(&b, "faulty proxies (left out of the figures above): %d stalled after full config, %d NACKing every response (%d responses received)\n",
			f.Stalled, f.Nacking, f.NackingReceived)
	}
	e := r.Errors
	fmt.Fprintf(&b, "errors: connect %d, stream %d, decode %d\n", e.Connect, e.Stream, e.Decode)
	if e.Last != "" {
		fmt.Fprintf(&b, "  last: %s\n", e.Last)
	}
	if e.LastInvalid != "" {
		fmt.Fprintf(&b, "  last invalid resource: %s\n", e.LastInvalid)
	}
	p := r.Process
	fmt.Fprintf(&b, "loadgen process: CPU %.1fs (user %.1fs, system %.1fs), max RSS %s",
		p.CPUUserSeconds+p.CPUSystemSeconds, p.CPUUserSeconds, p.CPUSystemSeconds, fmtBytes(p.MaxRSSBytes))
	if p.RSSAtFullConfigBytes > 0 && r.Proxies > 0 {
		fmt.Fprintf(&b, "; at full config RSS %s (%s per proxy), heap %s, %d goroutines",
			fmtBytes(p.RSSAtFullConfigBytes), fmtBytes(p.RSSAtFullConfigBytes/int64(r.Proxies)),
			fmtBytes(p.HeapAtFullConfigBytes), p.GoroutinesAtFullConfig)
	}
	b.WriteString("\n")
	if s := r.Server; s != nil {
		writeServer(&b, s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeServer writes the server line: what it cost over the run.
func writeServer(b *strings.Builder, s *ServerStats) {
	var what []string
	if s.MetricsURL != "" {
		what = append(what, s.MetricsURL)
	}
	if s.PID > 0 {
		what = append(what, fmt.Sprintf("pid %d", s.PID))
	}
	var parts []string
	if s.measured("cpu_seconds") {
		parts = append(parts, fmt.Sprintf("CPU %.2fs", s.CPUSeconds))
	}
	if s.measured("rss_bytes") {
		parts = append(parts, "max RSS "+fmtBytes(s.MaxRSSBytes))
	}
	if s.measured("pushes") {
		parts = append(parts, fmt.Sprintf("%d pushes", s.Pushes))
	}
	if s.measured("rejects") {
		parts = append(parts, fmt.Sprintf("%d rejects", s.Rejects))
	}
	if s.measured("push_errors") {
		parts = append(parts, fmt.Sprintf("%d push errors", s.PushErrors))
	}
	fmt.Fprintf(b, "server (%s) over the run: %s; %d samples, %d failed\n", strings.Join(what, ", "),
		strings.Join(parts, ", "), len(s.Samples), s.Errors)
	if s.LastError != "" {
		fmt.Fprintf(b, "  last server sample error: %s\n", s.LastError)
	}
}

func latencyRow(w io.Writer, name string, l Latency) {
	if l.Count == 0 {
		fmt.Fprintf(w, "%s\t0\t\t\t\t\t\t\n", name)
		return
	}
	fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", name, l.Count, fmtMS(l.MinMS), fmtMS(l.P50MS),
		fmtMS(l.P90MS), fmtMS(l.P99MS), fmtMS(l.MaxMS))
}

// fmtMS formats milliseconds for people: 850µs, 12.3ms, 4.56s, 2m03s.
func fmtMS(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.0fµs", v*1e3)
	case v < 100:
		return fmt.Sprintf("%.1fms", v)
	case v < 1e3:
		return fmt.Sprintf("%.0fms", v)
	case v < 60e3:
		return fmt.Sprintf("%.2fs", v/1e3)
	}
	s := int(v / 1e3)
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

// fmtBytes formats a byte count with binary units.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
