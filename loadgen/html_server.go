package loadgen

import (
	"fmt"
	"slices"
	"strings"
)

// The parts of the HTML report about the server under test, NACKs and
// faulty proxies. The NACK figures come from Report.NACKs only, as in the
// table (nackParts is shared), so the outputs cannot disagree.

// nackParts describes Report.NACKs beyond the total.
func nackParts(r *Report) []string {
	n := r.NACKs
	parts := []string{fmt.Sprintf("%d at NACK rate %s", n.AtRate, trimFloat(r.NackRate))}
	if f := r.Faults; f != nil && f.Nacking > 0 {
		parts = append(parts, fmt.Sprintf("%d by the %d NACKing proxies", n.ByNackingProxies, f.Nacking))
	}
	parts = append(parts, fmt.Sprintf("%d proxies ended on a rejected response", n.ProxiesRejecting))
	if s := r.Server; s != nil && s.measured("rejects") {
		parts = append(parts, fmt.Sprintf("%d counted by the server", s.Rejects))
	}
	return parts
}

func nackSummary(r *Report) string { return strings.Join(nackParts(r), " · ") }

// measured reports whether the ServerSample field named name was measured.
func (s *ServerStats) measured(name string) bool { return slices.Contains(s.Measures, name) }

func serverCard(s *ServerStats) htmlCard {
	c := htmlCard{Label: "server under test", Value: "—"}
	if s.measured("cpu_seconds") {
		c.Value = fmt.Sprintf("%.1fs CPU", s.CPUSeconds)
	}
	var sub []string
	if s.measured("rss_bytes") {
		sub = append(sub, "max RSS "+fmtBytes(s.MaxRSSBytes))
	}
	if s.measured("pushes") {
		sub = append(sub, fmt.Sprintf("%d pushes", s.Pushes))
	}
	if s.Errors > 0 {
		sub = append(sub, fmt.Sprintf("%d of %d samples failed", s.Errors, s.Attempts))
		c.Tone = "bad"
	}
	c.Sub = strings.Join(sub, " · ")
	return c
}

// serverLines are the server's series for the time charts; a series not
// measured is empty.
type serverLines struct {
	cpu, rss, pushes, rejects series
}

func serverSeries(s *ServerStats) serverLines {
	l := serverLines{
		cpu:     series{Name: "server", Color: colorBlue, Area: true},
		rss:     series{Name: "server RSS", Color: colorBlue},
		pushes:  series{Name: "server sent", Color: colorGreen, Area: true},
		rejects: series{Name: "server rejects", Color: colorPurple, Dash: true},
	}
	if s == nil || len(s.Samples) == 0 {
		return l
	}
	first := s.Samples[0]
	for _, x := range s.Samples {
		if s.measured("rss_bytes") {
			l.rss.Pts = append(l.rss.Pts, [2]float64{x.AtMS, float64(x.RSSBytes) / (1 << 20)})
		}
		if s.measured("rejects") {
			l.rejects.Pts = append(l.rejects.Pts, [2]float64{x.AtMS, float64(x.Rejects - first.Rejects)})
		}
	}
	at := func(i int) float64 { return s.Samples[i].AtMS }
	n, minMS := len(s.Samples), s.IntervalMS/2
	if s.measured("cpu_seconds") {
		l.cpu = rateSeries(l.cpu, n, at, func(i int) float64 { return s.Samples[i].CPUSeconds }, minMS)
	}
	if s.measured("pushes") {
		l.pushes = rateSeries(l.pushes, n, at, func(i int) float64 { return float64(s.Samples[i].Pushes) }, minMS)
	}
	return l
}

// nonEmpty returns the series that have points.
func nonEmpty(ss ...series) []series {
	var out []series
	for _, s := range ss {
		if len(s.Pts) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// titleWithServer names a chart "WHAT: server and loadgen" when the
// server's series is there, else alone.
func titleWithServer(what, alone string, server series) string {
	if len(server.Pts) > 1 {
		return what + ": server and loadgen"
	}
	return alone
}

// rateSeries sets s's points to the rate per second of a cumulative value
// v(i) sampled at at(i) ms, i < n: one point per span of at least minMS, so
// that a sample taken just after another (the last one of a run) does not
// make a spike of a few milliseconds' noise.
func rateSeries(s series, n int, at, v func(i int) float64, minMS float64) series {
	s.Pts = nil
	last := 0
	for i := 1; i < n; i++ {
		dt := at(i) - at(last)
		if dt <= 0 || dt < minMS {
			continue
		}
		s.Pts = append(s.Pts, [2]float64{at(i), max(v(i)-v(last), 0) / (dt / 1e3)})
		last = i
	}
	return s
}

// faultChart charts the NACKing and stalled proxies over time, when the
// run had any (or was set up to).
func (r *Report) faultChart(markers []marker, end float64) (htmlChart, bool) {
	nacking := series{Name: "NACKing", Color: colorRed, Area: true}
	stalled := series{Name: "stalled", Color: colorAmber, Area: true}
	show := r.Faults != nil || r.NackRate > 0
	for _, s := range r.Timeline {
		nacking.Pts = append(nacking.Pts, [2]float64{s.AtMS, float64(s.Nacking)})
		stalled.Pts = append(stalled.Pts, [2]float64{s.AtMS, float64(s.Stalled)})
		show = show || s.Nacking > 0 || s.Stalled > 0
	}
	if !show || len(r.Timeline) < 2 {
		return htmlChart{}, false
	}
	c := lineChart{xLabel: "time since start", yLabel: "proxies", series: []series{nacking, stalled}, markers: markers,
		xMin: 0, xMax: max(end, 1), xUnit: "s"}
	return htmlChart{Title: "Stalled and NACKing proxies",
		Note: "Proxies whose last response of some type was NACKed (they keep what they had: the server does not resend " +
			"a rejected response), and stalled proxies not reading their stream.", SVG: c.svg()}, true
}

// faultRows are the NACKs and faulty proxies table.
func (r *Report) faultRows() [][2]string {
	n := r.NACKs
	rows := [][2]string{
		{"NACKs sent", fmt.Sprint(n.Total)},
		{"at NACK rate " + trimFloat(r.NackRate), fmt.Sprint(n.AtRate)},
		{"by NACKing proxies", fmt.Sprint(n.ByNackingProxies)},
		{"proxies ended on a rejected response", fmt.Sprint(n.ProxiesRejecting)},
	}
	if s := r.Server; s != nil && s.measured("rejects") {
		rows = append(rows, [2]string{"rejects counted by the server", fmt.Sprint(s.Rejects)})
	}
	if f := r.Faults; f != nil {
		rows = append(rows,
			[2]string{"stalled proxies (left out of the figures)", fmt.Sprint(f.Stalled)},
			[2]string{"NACKing proxies (left out of the figures)", fmt.Sprint(f.Nacking)},
			[2]string{"responses the NACKing proxies received", fmt.Sprint(f.NackingReceived)})
		for _, c := range r.Changes {
			if f.Nacking > 0 {
				rows = append(rows, [2]string{fmt.Sprintf("… in change %d", c.Index),
					fmt.Sprintf("%d (%.1f each)", c.NackingReceived, float64(c.NackingReceived)/float64(f.Nacking))})
			}
		}
	}
	return rows
}

// serverRows are the server table.
func (s *ServerStats) rows() [][2]string {
	var rows [][2]string
	if s.MetricsURL != "" {
		rows = append(rows, [2]string{"metrics", s.MetricsURL})
	}
	if s.PID > 0 {
		rows = append(rows, [2]string{"pid", fmt.Sprint(s.PID)})
	}
	rows = append(rows, [2]string{"samples", fmt.Sprintf("%d of %d, every %s", len(s.Samples), s.Attempts, fmtMS(s.IntervalMS))})
	if s.measured("cpu_seconds") {
		rows = append(rows, [2]string{"CPU over the run", fmt.Sprintf("%.2fs", s.CPUSeconds)})
	}
	if s.measured("rss_bytes") {
		rows = append(rows, [2]string{"max RSS", fmtBytes(s.MaxRSSBytes)})
	}
	if s.measured("pushes") {
		rows = append(rows, [2]string{"pushes (pilot_xds_pushes)", fmt.Sprint(s.Pushes)})
	}
	if s.measured("rejects") {
		rows = append(rows, [2]string{"rejects (pilot_total_xds_rejects)", fmt.Sprint(s.Rejects)})
	}
	if s.measured("push_errors") {
		rows = append(rows, [2]string{"push errors (pilot_xds_push_errors)", fmt.Sprint(s.PushErrors)})
	}
	if s.LastError != "" {
		rows = append(rows, [2]string{"last error", s.LastError})
	}
	return rows
}
