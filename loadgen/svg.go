package loadgen

import (
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
)

// Charts for the HTML report, drawn as inline SVG so that the page needs
// nothing from the network. A small script in the page (html.go) adds a
// hover crosshair from the data-chart attribute each line chart carries.

// series is one line of a chart.
type series struct {
	Name  string       `json:"name"`
	Color string       `json:"color"`
	Pts   [][2]float64 `json:"pts"`
	Dash  bool         `json:"-"`
	Area  bool         `json:"-"`
	Step  bool         `json:"-"`
}

// marker is a vertical line at x.
type marker struct {
	x     float64
	label string
}

// lineChart is an x/y chart of series.
type lineChart struct {
	xLabel, yLabel string
	series         []series
	markers        []marker
	xMin, xMax     float64 // both 0: from the data
	yMax           float64 // 0: from the data
	// yFit fits the y axis to the data's range instead of starting at 0,
	// for levels that move little against their size (RSS).
	yFit         bool
	xUnit, yUnit string // see axisFormat
}

const (
	chartW, chartH                     = 560, 300
	padL, padR, padT, padB             = 64, 16, 40, 44
	plotW, plotH                       = chartW - padL - padR, chartH - padT - padB
	colorBlue, colorGreen, colorGray   = "#2563eb", "#16a34a", "#9ca3af"
	colorOrange, colorPurple, colorRed = "#ea580c", "#7c3aed", "#dc2626"
	colorTeal, colorAmber              = "#0d9488", "#d97706"
)

var palette = []string{colorBlue, colorGreen, colorOrange, colorPurple, colorTeal, colorRed, colorAmber}

// niceTicks returns about n round tick values covering [0, max].
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

// niceMax rounds v up to a round number for an axis end: a multiple of
// a tenth of v's magnitude's nice step, so that the axis ends at most
// about 20% past the data (the ticks, about five, stay round).
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	t := niceTicks(0, v, 10)
	step := t[1] - t[0]
	return math.Ceil(v/step-1e-9) * step
}

func (c *lineChart) bounds() (x0, x1, y0, y1 float64) {
	x0, x1 = c.xMin, c.xMax
	fromData := x0 == 0 && x1 == 0
	if fromData {
		x0, x1 = math.Inf(1), math.Inf(-1)
	}
	yLo := math.Inf(1)
	for _, s := range c.series {
		for _, p := range s.Pts {
			if fromData {
				x0, x1 = min(x0, p[0]), max(x1, p[0])
			}
			y1 = max(y1, p[1])
			yLo = min(yLo, p[1])
		}
	}
	if fromData {
		for _, m := range c.markers {
			x0, x1 = min(x0, m.x), max(x1, m.x)
		}
	}
	if math.IsInf(x0, 0) {
		x0, x1 = 0, 1
	}
	if x0 > 0 && x0 < (x1-x0)/2 {
		x0 = 0
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	x1 = x0 + niceMax(x1-x0)
	switch {
	case c.yMax > 0:
		y1 = c.yMax
	case c.yFit && !math.IsInf(yLo, 0):
		y0, y1 = fitRange(yLo, y1)
	default:
		y1 = niceMax(y1)
	}
	return x0, x1, y0, y1
}

// fitRange returns round axis ends around [lo, hi]: the nearest ticks
// outside it, about five ticks apart, so that a level that moves by 5%
// fills the chart. A flat series gets a band of 10% around it.
func fitRange(lo, hi float64) (y0, y1 float64) {
	if hi-lo < 1e-9*max(math.Abs(hi), 1) {
		pad := max(math.Abs(hi)*0.05, 0.5)
		lo, hi = lo-pad, hi+pad
	}
	t := niceTicks(lo, hi, 5)
	step := hi - lo
	if len(t) > 1 {
		step = t[1] - t[0]
	}
	y0 = math.Floor(lo/step) * step
	y1 = math.Ceil(hi/step) * step
	if lo >= 0 && y0 < 0 {
		y0 = 0
	}
	return y0, y1
}

// svg renders the chart.
func (c *lineChart) svg() template.HTML {
	x0, x1, y0, y1 := c.bounds()
	xFmt, yFmt := axisFormat(c.xUnit), axisFormat(c.yUnit)
	sx := func(x float64) float64 { return padL + (x-x0)/(x1-x0)*plotW }
	sy := func(y float64) float64 { return padT + plotH - (y-y0)/(y1-y0)*plotH }
	var b strings.Builder
	data, _ := json.Marshal(map[string]any{
		"x0": x0, "x1": x1, "y0": y0, "y1": y1, "l": padL, "t": padT, "w": plotW, "h": plotH,
		"xs": c.xUnit, "ys": c.yUnit, "series": c.series,
	})
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" data-chart="%s">`, chartW, chartH, html.EscapeString(string(data)))
	// Grid and axes.
	for _, t := range niceTicks(y0, y1, 5) {
		y := sy(t)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padL, padL+plotW, y, y)
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end" dy="4">%s</text>`, padL-6, y, html.EscapeString(yFmt(t)))
	}
	for _, t := range niceTicks(x0, x1, 6) {
		x := sx(t)
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>`, x, x, padT, padT+plotH)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, padT+plotH+16, html.EscapeString(xFmt(t)))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>`, padL, padL+plotW, padT+plotH, padT+plotH)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>`, padL, padL, padT, padT+plotH)
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="middle">%s</text>`, padL+plotW/2, chartH-6, html.EscapeString(c.xLabel))
	fmt.Fprintf(&b, `<text class="label" transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`, padT+plotH/2, html.EscapeString(c.yLabel))
	// Markers.
	for _, m := range c.markers {
		x := sx(m.x)
		fmt.Fprintf(&b, `<line class="marker" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>`, x, x, padT, padT+plotH)
		fmt.Fprintf(&b, `<text class="marker-label" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, padT-4, html.EscapeString(m.label))
	}
	// Series.
	b.WriteString(`<g>`)
	for _, s := range c.series {
		if len(s.Pts) == 0 {
			continue
		}
		var path strings.Builder
		for i, p := range s.Pts {
			x, y := sx(p[0]), sy(p[1])
			switch {
			case i == 0:
				fmt.Fprintf(&path, "M%.1f %.1f", x, y)
			case s.Step:
				fmt.Fprintf(&path, "H%.1fV%.1f", x, y)
			default:
				fmt.Fprintf(&path, "L%.1f %.1f", x, y)
			}
		}
		if s.Area {
			last, first := s.Pts[len(s.Pts)-1], s.Pts[0]
			fmt.Fprintf(&b, `<path d="%sL%.1f %.1fL%.1f %.1fZ" fill="%s" fill-opacity="0.12" stroke="none"/>`,
				path.String(), sx(last[0]), sy(y0), sx(first[0]), sy(y0), s.Color)
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s stroke-linejoin="round"/>`, path.String(), s.Color, dash)
	}
	b.WriteString(`</g>`)
	// Legend.
	lx := padL
	for _, s := range c.series {
		if s.Name == "" {
			continue
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/>`, lx, 9, s.Color)
		fmt.Fprintf(&b, `<text class="legend" x="%d" y="%d">%s</text>`, lx+16, 14, html.EscapeString(s.Name))
		lx += 28 + 7*len([]rune(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// axisFormat formats axis values of a unit: "s" (milliseconds shown as
// seconds), "ms", "%", "MiB", "cores" or "" (a count). The hover script
// knows the same units.
func axisFormat(unit string) func(float64) string {
	switch unit {
	case "s":
		return axisSeconds
	case "ms":
		return axisMS
	case "%":
		return axisPercent
	case "MiB":
		return axisMiB
	case "cores":
		return func(v float64) string { return trimFloat(v) }
	}
	return axisCount
}

func axisSeconds(v float64) string { return trimFloat(v/1e3) + "s" }
func axisMS(v float64) string      { return fmtMS(v) }
func axisPercent(v float64) string { return trimFloat(v) + "%" }
func axisCount(v float64) string   { return trimFloat(v) }
func axisMiB(v float64) string     { return trimFloat(v) + " MiB" }

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// bar is one bar of a bar chart.
type bar struct {
	label string
	value float64
	text  string
	color string
}

// barChart renders horizontal bars.
func barChart(bars []bar) template.HTML {
	const rowH, labelW, textW = 34, 64, 200
	h := len(bars)*rowH + 12
	vmax := 0.0
	for _, b := range bars {
		vmax = max(vmax, b.value)
	}
	if vmax == 0 {
		vmax = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart bars" viewBox="0 0 %d %d" role="img">`, chartW, h)
	for i, br := range bars {
		y := 6 + i*rowH
		w := br.value / vmax * float64(chartW-labelW-textW)
		fmt.Fprintf(&b, `<text class="legend" x="%d" y="%d" text-anchor="end">%s</text>`, labelW-10, y+rowH/2+2, html.EscapeString(br.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" rx="3" fill="%s"><title>%s</title></rect>`,
			labelW, y+5, max(w, 1), rowH-12, br.color, html.EscapeString(br.label+": "+br.text))
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d">%s</text>`, float64(labelW)+max(w, 1)+8, y+rowH/2+2, html.EscapeString(br.text))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
