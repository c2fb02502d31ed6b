package loadgen

import (
	"bytes"
	"errors"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
)

// capturedMetrics is pilotfish's /metrics page, captured after 20 sidecars
// at --nack-rate 0.3 got their config (72 pushes, 18 of them NACKed).
func capturedMetrics(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/pilotfish-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePromCaptured(t *testing.T) {
	var m promValues
	if err := parseProm(capturedMetrics(t), m.add); err != nil {
		t.Fatal(err)
	}
	got := m.sample()
	want := ServerSample{CPUSeconds: 0.08, RSSBytes: 64888832, HeapBytes: 8871280, Pushes: 72, Rejects: 18}
	if got != want {
		t.Errorf("read %+v, want %+v", got, want)
	}
	if want := hasCPU | hasRSS | hasHeap | hasPushes | hasRejects | hasProxies; m.has != want {
		t.Errorf("found %b, want %b (no push error has been counted: no series)", m.has, want)
	}
}

func TestParseProm(t *testing.T) {
	type kv struct {
		name  string
		value float64
	}
	for _, c := range []struct {
		name, text string
		want       []kv
		bad        string // the error names this
	}{
		{name: "plain", text: "a 1\nb_total 2.5\n", want: []kv{{"a", 1}, {"b_total", 2.5}}},
		{name: "labels", text: `pilot_xds_pushes{type="cds",le="+Inf"} 20` + "\n", want: []kv{{"pilot_xds_pushes", 20}}},
		{name: "escapes", text: `m{a="x\"y\\z\n",b=""} 3`, want: []kv{{"m", 3}}},
		{name: "trailing comma and spaces", text: "m { a = \"1\" , } \t 4  1700000000000 \r\n", want: []kv{{"m", 4}}},
		{name: "comments", text: "# HELP m help\n# TYPE m counter\n\n   \nm 1\n# EOF\n", want: []kv{{"m", 1}}},
		{name: "special values", text: "a NaN\nb +Inf\nc -Inf\nd 1e+06\n", want: []kv{{"a", math.NaN()}, {"b", math.Inf(1)}, {"c", math.Inf(-1)}, {"d", 1e6}}},
		{name: "colon", text: "job:rate5m 7", want: []kv{{"job:rate5m", 7}}},
		{name: "no value", text: "a\n", bad: "line 1: no value after the metric name"},
		{name: "no space", text: "a+1\n", bad: "no value after the metric name"},
		{name: "no value after labels", text: "a{b=\"c\"}\n", bad: "no value after the metric name"},
		{name: "value right after labels", text: "a{b=\"c\"}5", want: []kv{{"a", 5}}},
		{name: "bad value", text: "a 1\nb one\n", bad: "line 2: bad value"},
		{name: "bad timestamp", text: "a 1 soon", bad: "bad timestamp"},
		{name: "extra text", text: "a 1 2 3", bad: "text after the timestamp"},
		{name: "no name", text: "{a=\"b\"} 1", bad: "no metric name"},
		{name: "digit first", text: "1a 1", bad: "no metric name"},
		{name: "unterminated labels", text: `a{b="c"`, bad: "no ',' or '}' after a label"},
		{name: "unterminated value", text: `a{b="c} 1`, bad: "unterminated label value"},
		{name: "escape at end", text: `a{b="c\`, bad: "unterminated label value"},
		{name: "unquoted", text: `a{b=c} 1`, bad: "label value not quoted"},
		{name: "no equals", text: `a{b "c"} 1`, bad: "no '=' after a label name"},
		{name: "bad label name", text: `a{0b="c"} 1`, bad: "bad label name"},
		{name: "no comma", text: `a{b="c" d="e"} 1`, bad: "no ',' or '}' after a label"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []kv
			err := parseProm([]byte(c.text), func(name []byte, v float64) { got = append(got, kv{string(name), v}) })
			if c.bad != "" {
				if !errors.Is(err, ErrMetrics) || !strings.Contains(err.Error(), c.bad) {
					t.Fatalf("err = %v, want ErrMetrics naming %q", err, c.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				w := c.want[i]
				if got[i].name != w.name || !(got[i].value == w.value || math.IsNaN(w.value) && math.IsNaN(got[i].value)) {
					t.Errorf("sample %d: %v, want %v", i, got[i], w)
				}
			}
		})
	}
}

// TestParsePromLongLine: an error quotes the start of the line only.
func TestParsePromLongLine(t *testing.T) {
	err := parseProm([]byte("a "+strings.Repeat("x", 1<<20)), func([]byte, float64) {})
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("err = %.300v (%d bytes)", err, len(err.Error()))
	}
}

var promName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// FuzzParseProm: any input parses or fails with an ErrMetrics, without
// panicking; what parses yields one sample per line that is neither blank
// nor a comment, each with a valid metric name.
func FuzzParseProm(f *testing.F) {
	// Lines of the captured page (the whole page, 22 KB, makes each
	// minimization slow).
	for _, prefix := range []string{"# HELP pilot_xds_pushes", "pilot_xds_pushes", "pilot_xds_config_size_bytes_bucket{type=\"cds\"", "process_"} {
		var seed []byte
		for line := range bytes.Lines(capturedMetrics(f)) {
			if bytes.HasPrefix(line, []byte(prefix)) {
				seed = append(seed, line...)
			}
		}
		f.Add(seed)
	}
	for _, s := range []string{"a 1", `m{a="x\"y\\z\n",b=""} 3 17`, "# EOF", "a{b=\"c\\", "a{} NaN", "\xff 1", "a\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		n := 0
		err := parseProm(text, func(name []byte, v float64) {
			n++
			if !promName.Match(name) {
				t.Fatalf("invalid name %q", name)
			}
		})
		if err != nil {
			if !errors.Is(err, ErrMetrics) {
				t.Fatalf("err %v is not an ErrMetrics", err)
			}
			return
		}
		lines := 0
		for line := range bytes.Lines(text) {
			line = trimSpace(bytes.TrimRight(bytes.TrimRight(line, "\n"), "\r"))
			if len(line) > 0 && line[0] != '#' {
				lines++
			}
		}
		if n != lines {
			t.Fatalf("%d samples from %d sample lines", n, lines)
		}
	})
}
