package loadgen

import (
	"fmt"
	"html/template"
	"io"
	"time"
)

// WriteHTML writes the report as one self-contained HTML page: summary
// cards, charts drawn as inline SVG (proxies over time, time-to-full-config
// and convergence CDFs, bytes per type, receive rate, loadgen's CPU and
// memory) with a small inline hover script, and the tables. It loads
// nothing from the network.
func (r *Report) WriteHTML(w io.Writer) error {
	return htmlPage.Execute(w, r.htmlView())
}

type htmlCard struct {
	Label, Value, Sub string
	Tone              string // good, bad or ""
}

type htmlChart struct {
	Title, Note string
	SVG         template.HTML
}

type htmlView struct {
	Title, Subtitle string
	Complete        bool
	Cards           []htmlCard
	Charts          []htmlChart
	Latency         [][]string
	Types           [][]string
	Changes         [][]string
	Faults          [][2]string // NACKs and faulty proxies
	Server          [][2]string // the server under test; nil: not sampled
	Errors          [][2]string
	Config          [][2]string
	Generated       string
}

// latencyUnit picks the x unit of a latency chart: seconds past 2s.
func latencyUnit(maxMS float64) string {
	if maxMS > 2000 {
		return "s"
	}
	return "ms"
}

func cdfSeries(name, color string, l Latency) series {
	s := series{Name: name, Color: color, Step: true}
	for q, v := range l.CDFMS {
		s.Pts = append(s.Pts, [2]float64{v, float64(q)})
	}
	return s
}

func (r *Report) htmlView() htmlView {
	v := htmlView{
		Title: fmt.Sprintf("%d %s proxies → %s", r.Proxies, r.ProxyType, r.Target),
		Subtitle: fmt.Sprintf("%s xDS, %s decode, %d connection(s), %s, started %s", r.Mode, r.Decode, r.Connections,
			fmtMS(r.ElapsedMS), r.StartedAt.Format(time.RFC3339)),
		Complete:  r.Complete,
		Generated: "pilotfish loadgen",
	}

	// Cards.
	tone := func(ok bool) string {
		if ok {
			return "good"
		}
		return "bad"
	}
	canFull := r.Proxies
	if r.Faults != nil {
		canFull -= r.Faults.Nacking // they never accept a config
	}
	v.Cards = append(v.Cards, htmlCard{Label: "full config", Value: fmt.Sprintf("%d / %d", r.FullConfig, canFull),
		Sub: fmt.Sprintf("%d connected", r.Connected), Tone: tone(r.FullConfig == canFull)})
	all := "—"
	if r.AllFullConfigMS > 0 {
		all = fmtMS(r.AllFullConfigMS)
	}
	v.Cards = append(v.Cards, htmlCard{Label: "all proxies at full config", Value: all, Sub: fmt.Sprintf("ramp %s", rampText(r.RampPerSecond))})
	if l := r.TimeToFullConfig; l.Count > 0 {
		v.Cards = append(v.Cards, htmlCard{Label: "time to full config", Value: fmtMS(l.P50MS) + " p50",
			Sub: fmt.Sprintf("p99 %s · max %s", fmtMS(l.P99MS), fmtMS(l.MaxMS))})
	}
	for _, c := range r.Changes {
		card := htmlCard{Label: fmt.Sprintf("change %d convergence", c.Index), Value: "—",
			Tone: tone(c.NotConverged == 0 && c.Error == "")}
		if c.Convergence.Count > 0 {
			card.Value = fmtMS(c.Convergence.P50MS) + " p50"
			card.Sub = fmt.Sprintf("p99 %s · max %s · %d/%d", fmtMS(c.Convergence.P99MS), fmtMS(c.Convergence.MaxMS),
				c.Converged, c.Converged+c.NotConverged)
		}
		if c.Error != "" {
			card.Sub = "failed: " + c.Error
		}
		v.Cards = append(v.Cards, card)
		if len(v.Cards) >= 6 {
			break
		}
	}
	var totalBytes, totalResp int64
	for _, t := range r.Types {
		totalBytes += t.Bytes
		totalResp += t.Responses
	}
	perProxy := ""
	if r.Proxies > 0 {
		perProxy = fmtBytes(r.BytesToFullConfig/int64(r.Proxies)) + " per proxy to full config"
	}
	v.Cards = append(v.Cards, htmlCard{Label: "received", Value: fmtBytes(totalBytes),
		Sub: fmt.Sprintf("%d responses · %s", totalResp, perProxy)})
	v.Cards = append(v.Cards, htmlCard{Label: "NACKs", Value: fmt.Sprint(r.NACKs.Total), Sub: nackSummary(r)})
	errs := r.Errors.Connect + r.Errors.Stream + r.Errors.Decode
	v.Cards = append(v.Cards, htmlCard{Label: "errors", Value: fmt.Sprint(errs),
		Sub:  fmt.Sprintf("connect %d · stream %d · decode %d", r.Errors.Connect, r.Errors.Stream, r.Errors.Decode),
		Tone: map[bool]string{true: "bad"}[errs > 0]})
	p := r.Process
	rssPer := ""
	if r.Proxies > 0 && p.RSSAtFullConfigBytes > 0 {
		rssPer = fmtBytes(p.RSSAtFullConfigBytes/int64(r.Proxies)) + " RSS per proxy · "
	}
	v.Cards = append(v.Cards, htmlCard{Label: "loadgen process", Value: fmt.Sprintf("%.1fs CPU", p.CPUUserSeconds+p.CPUSystemSeconds),
		Sub: rssPer + "max RSS " + fmtBytes(p.MaxRSSBytes)})
	if s := r.Server; s != nil {
		v.Cards = append(v.Cards, serverCard(s))
	}

	// Charts.
	var markers []marker
	for _, c := range r.Changes {
		markers = append(markers, marker{x: c.AtMS, label: fmt.Sprintf("change %d", c.Index)})
	}
	launched := series{Name: "launched", Color: colorGray, Dash: true}
	connected := series{Name: "connected", Color: colorBlue}
	full := series{Name: "full config", Color: colorGreen, Area: true}
	rate := series{Name: "MiB/s", Color: colorPurple, Area: true}
	respRate := series{Name: "loadgen received", Color: colorBlue}
	cpu := series{Name: "loadgen", Color: colorOrange, Area: true}
	rss := series{Name: "loadgen RSS", Color: colorOrange}
	nacksSent := series{Name: "loadgen NACKs", Color: colorRed}
	for _, s := range r.Timeline {
		launched.Pts = append(launched.Pts, [2]float64{s.AtMS, float64(s.Launched)})
		connected.Pts = append(connected.Pts, [2]float64{s.AtMS, float64(s.Connected)})
		full.Pts = append(full.Pts, [2]float64{s.AtMS, float64(s.FullConfig)})
		rss.Pts = append(rss.Pts, [2]float64{s.AtMS, float64(s.RSSBytes) / (1 << 20)})
		nacksSent.Pts = append(nacksSent.Pts, [2]float64{s.AtMS, float64(s.NACKs)})
	}
	if n := len(r.Timeline); n > 1 {
		tl := r.Timeline
		minMS := (tl[n-1].AtMS - tl[0].AtMS) / float64(n-1) / 2
		at := func(i int) float64 { return tl[i].AtMS }
		rate = rateSeries(rate, n, at, func(i int) float64 { return float64(tl[i].Bytes) / (1 << 20) }, minMS)
		respRate = rateSeries(respRate, n, at, func(i int) float64 { return float64(tl[i].Responses) }, minMS)
		cpu = rateSeries(cpu, n, at, func(i int) float64 { return tl[i].CPUSeconds }, minMS)
	}
	var end float64
	if n := len(r.Timeline); n > 0 {
		end = r.Timeline[n-1].AtMS
	}
	if s := r.Server; s != nil && len(s.Samples) > 0 {
		end = max(end, s.Samples[len(s.Samples)-1].AtMS)
	}
	timeChart := func(title, note, yLabel, yUnit string, s ...series) htmlChart {
		c := lineChart{xLabel: "time since start", yLabel: yLabel, series: s, markers: markers, xMin: 0, xMax: max(end, 1),
			xUnit: "s", yUnit: yUnit}
		return htmlChart{Title: title, Note: note, SVG: c.svg()}
	}
	fitChart := func(title, note, yLabel, yUnit string, s ...series) htmlChart {
		c := lineChart{xLabel: "time since start", yLabel: yLabel, series: s, markers: markers, xMin: 0, xMax: max(end, 1),
			xUnit: "s", yUnit: yUnit, yFit: true}
		return htmlChart{Title: title, Note: note, SVG: c.svg()}
	}
	v.Charts = append(v.Charts, timeChart("Proxies over time",
		"Launched, with an open stream, and with full config (every subscribed type ACKed, every EDS/RDS name held).",
		"proxies", "", launched, connected, full))
	if l := r.TimeToFullConfig; l.Count > 0 {
		c := lineChart{xLabel: "time to full config", yLabel: "proxies", yMax: 100, xUnit: latencyUnit(l.MaxMS), yUnit: "%",
			series: []series{cdfSeries("time to full config", colorGreen, l)}}
		v.Charts = append(v.Charts, htmlChart{Title: "Time to full config (CDF)",
			Note: fmt.Sprintf("Share of proxies at full config within a time of their launch. p50 %s, p90 %s, p99 %s.",
				fmtMS(l.P50MS), fmtMS(l.P90MS), fmtMS(l.P99MS)), SVG: c.svg()})
	}
	var conv []series
	var convMax float64
	for i, ch := range r.Changes {
		if ch.Convergence.Count == 0 {
			continue
		}
		s := cdfSeries(fmt.Sprintf("change %d", ch.Index), palette[i%len(palette)], ch.Convergence)
		// The CDF is of converged proxies; scale to all proxies so that an
		// incomplete change visibly stops short of 100%.
		scale := float64(ch.Converged) / float64(max(ch.Converged+ch.NotConverged, 1))
		for j := range s.Pts {
			s.Pts[j][1] *= scale
		}
		conv = append(conv, s)
		convMax = max(convMax, ch.Convergence.MaxMS)
	}
	if len(conv) > 0 {
		c := lineChart{xLabel: "time since the change", yLabel: "proxies converged", yMax: 100, xUnit: latencyUnit(convMax),
			yUnit: "%", series: conv}
		v.Charts = append(v.Charts, htmlChart{Title: "Convergence after each change (CDF)",
			Note: "Share of all proxies that had ACKed config reflecting the change, with full config, by time since the change.",
			SVG:  c.svg()})
	}
	var bars []bar
	for i, t := range r.Types {
		if t.Type == "other" && t.Responses == 0 {
			continue
		}
		bars = append(bars, bar{label: t.Type, value: float64(t.Bytes), color: palette[i%len(palette)],
			text: fmt.Sprintf("%s · %d pushes", fmtBytes(t.Bytes), t.Responses)})
	}
	v.Charts = append(v.Charts, htmlChart{Title: "Bytes received per type",
		Note: "DiscoveryResponse bytes over all proxies, initial config and changes.", SVG: barChart(bars)})
	if len(rate.Pts) > 1 {
		v.Charts = append(v.Charts, timeChart("Receive rate", "xDS bytes received per second by all proxies.", "MiB/s", "", rate))
	}
	sv := serverSeries(r.Server)
	if len(sv.pushes.Pts) > 1 {
		v.Charts = append(v.Charts, timeChart("Pushes: sent by the server, received by loadgen",
			"xDS responses per second: pilot_xds_pushes of the server (all proxies it serves) and what the simulated proxies received.",
			"responses/s", "", sv.pushes, respRate))
	}
	cpuNote := "CPU used by the loadgen process (cores); it shares the machine with what it measures if they run together."
	if len(sv.cpu.Pts) > 1 {
		cpuNote = "CPU used by the server under test and by loadgen (cores). On one machine they compete for the same cores."
	}
	if len(cpu.Pts) > 1 || len(sv.cpu.Pts) > 1 {
		v.Charts = append(v.Charts, timeChart(titleWithServer("CPU", "loadgen CPU", sv.cpu), cpuNote, "cores", "cores", nonEmpty(sv.cpu, cpu)...))
	}
	memNote := "Resident set size of the loadgen process; the axis spans the run's range."
	if len(sv.rss.Pts) > 1 {
		memNote = "Resident set size of the server under test and of loadgen; the axis spans the run's range."
	}
	if (len(rss.Pts) > 1 && rss.Pts[len(rss.Pts)-1][1] > 0) || len(sv.rss.Pts) > 1 {
		v.Charts = append(v.Charts, fitChart(titleWithServer("Memory", "loadgen memory", sv.rss), memNote, "MiB", "MiB", nonEmpty(sv.rss, rss)...))
	}
	if c, ok := r.faultChart(markers, end); ok {
		v.Charts = append(v.Charts, c)
	}
	if len(nacksSent.Pts) > 1 && (r.NACKs.Total > 0 || len(sv.rejects.Pts) > 1 && r.Server.Rejects > 0) {
		v.Charts = append(v.Charts, timeChart("NACKs: sent by loadgen, counted by the server",
			"NACKs sent since the start, and pilot_total_xds_rejects of the server since the start.",
			"NACKs", "", nonEmpty(nacksSent, sv.rejects)...))
	}

	// Tables.
	latRow := func(name string, l Latency) []string {
		if l.Count == 0 {
			return []string{name, "0", "", "", "", "", ""}
		}
		return []string{name, fmt.Sprint(l.Count), fmtMS(l.MinMS), fmtMS(l.P50MS), fmtMS(l.P90MS), fmtMS(l.P99MS), fmtMS(l.MaxMS)}
	}
	v.Latency = append(v.Latency, latRow("time to full config", r.TimeToFullConfig))
	for _, c := range r.Changes {
		v.Latency = append(v.Latency, latRow(fmt.Sprintf("change %d convergence", c.Index), c.Convergence))
	}
	for _, t := range r.Types {
		if t.ResponseLatency.Count > 0 {
			v.Latency = append(v.Latency, latRow(t.Type+" response", t.ResponseLatency))
		}
	}
	var tot TypeStats
	for _, t := range r.Types {
		if t.Type == "other" && t.Responses == 0 {
			continue
		}
		held := fmt.Sprint(t.HeldMin)
		if t.HeldMax != t.HeldMin {
			held = fmt.Sprintf("%d–%d", t.HeldMin, t.HeldMax)
		}
		v.Types = append(v.Types, []string{t.Type, fmt.Sprint(t.Responses), fmt.Sprint(t.Resources), fmtBytes(t.Bytes),
			fmt.Sprint(t.ACKs), fmt.Sprint(t.NACKs), fmt.Sprint(t.Invalid), held})
		tot.Responses += t.Responses
		tot.Resources += t.Resources
		tot.Bytes += t.Bytes
		tot.ACKs += t.ACKs
		tot.Invalid += t.Invalid
	}
	v.Types = append(v.Types, []string{"total", fmt.Sprint(tot.Responses), fmt.Sprint(tot.Resources), fmtBytes(tot.Bytes),
		fmt.Sprint(tot.ACKs), fmt.Sprint(r.NACKs.Total), fmt.Sprint(tot.Invalid), ""})
	v.Faults = r.faultRows()
	if r.Server != nil {
		v.Server = r.Server.rows()
	}
	for _, c := range r.Changes {
		what := c.Expect
		if what == "" {
			what = "any version bump"
		}
		status := fmt.Sprintf("%d/%d", c.Converged, c.Converged+c.NotConverged)
		if c.Error != "" {
			status = "failed: " + c.Error
		}
		v.Changes = append(v.Changes, []string{fmt.Sprint(c.Index), fmtMS(c.AtMS), what, status,
			fmt.Sprint(c.Responses), fmtBytes(c.Bytes)})
	}
	if r.Errors.Last != "" {
		v.Errors = append(v.Errors, [2]string{"last stream error", r.Errors.Last})
	}
	if r.Errors.LastInvalid != "" {
		v.Errors = append(v.Errors, [2]string{"last invalid resource", r.Errors.LastInvalid})
	}
	v.Config = [][2]string{
		{"target", r.Target}, {"proxies", fmt.Sprint(r.Proxies)}, {"type", r.ProxyType}, {"mode", r.Mode},
		{"decode", r.Decode}, {"streams per connection", fmt.Sprint(r.StreamsPerConn)},
		{"ramp", rampText(r.RampPerSecond)}, {"NACK rate", fmt.Sprint(r.NackRate)},
		{"bytes to full config", fmtBytes(r.BytesToFullConfig)},
		{"heap at full config", fmtBytes(p.HeapAtFullConfigBytes)},
		{"goroutines at full config", fmt.Sprint(p.GoroutinesAtFullConfig)},
		{"interned names", fmt.Sprint(p.InternedNames)},
	}
	return v
}

func rampText(perSecond float64) string {
	if perSecond <= 0 {
		return "all at once"
	}
	return trimFloat(perSecond) + "/s"
}

var htmlPage = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>loadgen: {{.Title}}</title>
<style>
:root { --fg:#111827; --muted:#6b7280; --line:#e5e7eb; --bg:#f8fafc; --card:#fff; --good:#16a34a; --bad:#dc2626; }
* { box-sizing: border-box; }
body { margin: 0; padding: 28px 32px 48px; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { display: flex; align-items: baseline; gap: 14px; flex-wrap: wrap; }
h1 { font-size: 22px; margin: 0; }
h2 { font-size: 15px; margin: 0 0 2px; }
.sub { color: var(--muted); margin: 4px 0 20px; }
.badge { font-size: 12px; font-weight: 600; padding: 2px 10px; border-radius: 999px; color: #fff; }
.badge.good { background: var(--good); } .badge.bad { background: var(--bad); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 12px; margin-bottom: 20px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 22px; font-weight: 650; margin-top: 2px; font-variant-numeric: tabular-nums; }
.card .cs { color: var(--muted); font-size: 12px; }
.card.good { border-left: 4px solid var(--good); } .card.bad { border-left: 4px solid var(--bad); }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px; }
.panel { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; position: relative; }
.note { color: var(--muted); font-size: 12px; margin: 0 0 6px; }
svg.chart { width: 100%; height: auto; display: block; }
svg .grid { stroke: #eef0f3; } svg .axis { stroke: #9ca3af; }
svg .tick { fill: #6b7280; font-size: 11px; } svg .label { fill: #374151; font-size: 12px; }
svg .legend { fill: #374151; font-size: 12px; }
svg .marker { stroke: #ea580c; stroke-dasharray: 3 3; } svg .marker-label { fill: #ea580c; font-size: 11px; }
svg .hover { stroke: #111827; stroke-opacity: .35; }
.tip { position: absolute; pointer-events: none; background: rgba(17,24,39,.92); color: #fff; font-size: 12px;
  padding: 6px 8px; border-radius: 6px; white-space: nowrap; display: none; z-index: 2; }
.tip i { display: inline-block; width: 8px; height: 8px; border-radius: 2px; margin-right: 5px; }
.tables { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px; margin-top: 14px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: right; padding: 5px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
td.wrap { text-align: left; white-space: normal; word-break: break-all; }
footer { color: var(--muted); font-size: 12px; margin-top: 24px; }
</style>
</head>
<body>
<header><h1>{{.Title}}</h1>{{if .Complete}}<span class="badge good">complete</span>{{else}}<span class="badge bad">incomplete</span>{{end}}</header>
<p class="sub">{{.Subtitle}}</p>
<section class="cards">
{{range .Cards}}<div class="card {{.Tone}}"><div class="label">{{.Label}}</div><div class="value">{{.Value}}</div><div class="cs">{{.Sub}}</div></div>
{{end}}</section>
<section class="charts">
{{range .Charts}}<div class="panel"><h2>{{.Title}}</h2><p class="note">{{.Note}}</p>{{.SVG}}<div class="tip"></div></div>
{{end}}</section>
<section class="tables">
<div class="panel"><h2>Latency</h2>
<table><tr><th></th><th>count</th><th>min</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>
{{range .Latency}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table></div>
<div class="panel"><h2>Per type</h2>
<table><tr><th>type</th><th>responses</th><th>resources</th><th>bytes</th><th>ACKs</th><th>NACKs</th><th>invalid</th><th>held/proxy</th></tr>
{{range .Types}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table></div>
{{if .Changes}}<div class="panel"><h2>Changes</h2>
<table><tr><th>#</th><th>at</th><th>recognised by</th><th>converged</th><th>responses</th><th>bytes</th></tr>
{{range .Changes}}<tr>{{range $i, $c := .}}<td{{if eq $i 2}} class="wrap"{{end}}>{{$c}}</td>{{end}}</tr>{{end}}</table></div>{{end}}
<div class="panel" id="nacks"><h2>NACKs and faulty proxies</h2>
<table>{{range .Faults}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>{{end}}</table></div>
{{if .Server}}<div class="panel" id="server"><h2>Server under test</h2>
<table>{{range .Server}}<tr><td>{{index . 0}}</td><td class="wrap">{{index . 1}}</td></tr>{{end}}</table></div>{{end}}
<div class="panel"><h2>Run</h2>
<table>{{range .Config}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>{{end}}
{{range .Errors}}<tr><td>{{index . 0}}</td><td class="wrap">{{index . 1}}</td></tr>{{end}}</table></div>
</section>
<footer>{{.Generated}} · hover a chart for values</footer>
<script>
(function () {
  function fmt(unit, v) {
    if (unit === "s") return (v / 1000).toFixed(v < 10000 ? 2 : 1) + "s";
    if (unit === "ms") return v < 1 ? (v * 1000).toFixed(0) + "µs" : v < 100 ? v.toFixed(1) + "ms" : v < 1000 ? v.toFixed(0) + "ms" : (v / 1000).toFixed(2) + "s";
    if (unit === "%") return v.toFixed(1) + "%";
    if (unit === "MiB") return v.toFixed(1) + " MiB";
    if (unit === "cores") return v.toFixed(2);
    return Math.round(v * 100) / 100 + "";
  }
  document.querySelectorAll("svg[data-chart]").forEach(function (svg) {
    var c = JSON.parse(svg.getAttribute("data-chart"));
    var tip = svg.parentNode.querySelector(".tip");
    var ns = "http://www.w3.org/2000/svg";
    var line = document.createElementNS(ns, "line");
    line.setAttribute("class", "hover"); line.setAttribute("y1", c.t); line.setAttribute("y2", c.t + c.h);
    line.style.display = "none"; svg.appendChild(line);
    svg.addEventListener("mousemove", function (e) {
      var pt = svg.createSVGPoint(); pt.x = e.clientX; pt.y = e.clientY;
      var p = pt.matrixTransform(svg.getScreenCTM().inverse());
      if (p.x < c.l || p.x > c.l + c.w) { line.style.display = "none"; tip.style.display = "none"; return; }
      var x = c.x0 + (p.x - c.l) / c.w * (c.x1 - c.x0);
      var rows = [];
      (c.series || []).forEach(function (s) {
        if (!s.pts || !s.pts.length) return;
        var best = null;
        if (c.ys === "%") {
          for (var i = 0; i < s.pts.length && s.pts[i][0] <= x; i++) best = s.pts[i];
        } else {
          for (var j = 0; j < s.pts.length; j++) if (best === null || Math.abs(s.pts[j][0] - x) < Math.abs(best[0] - x)) best = s.pts[j];
        }
        var y = best ? best[1] : 0;
        rows.push('<i style="background:' + s.color + '"></i>' + s.name + ": " + fmt(c.ys, y));
      });
      line.setAttribute("x1", p.x); line.setAttribute("x2", p.x); line.style.display = "";
      tip.innerHTML = "<b>" + fmt(c.xs, x) + "</b><br>" + rows.join("<br>");
      var box = svg.parentNode.getBoundingClientRect();
      tip.style.display = "block";
      var left = e.clientX - box.left + 14;
      if (left + tip.offsetWidth > box.width) left = e.clientX - box.left - tip.offsetWidth - 14;
      tip.style.left = left + "px"; tip.style.top = (e.clientY - box.top + 10) + "px";
    });
    svg.addEventListener("mouseleave", function () { line.style.display = "none"; tip.style.display = "none"; });
  });
})();
</script>
</body>
</html>
`))
