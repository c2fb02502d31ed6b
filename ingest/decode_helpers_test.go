package ingest_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// benchDir holds Istio's own benchmark workloads, shared by the project.
const benchDir = "../../shared/workloads/istio-bench"

// benchWorkloads renders Istio's benchmark workloads (Go templates with
// until/div/mod, as istiod's benchmark renders them) at the given size.
// It returns nil when the directory is not there.
func benchWorkloads(tb testing.TB, services int) map[string][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(benchDir, "*.yaml"))
	if len(files) == 0 {
		return nil
	}
	funcs := template.FuncMap{
		"until": func(n int) []int {
			s := make([]int, n)
			for i := range s {
				s[i] = i
			}
			return s
		},
		"div": func(a, b int) int { return a / b },
		"mod": func(a, b int) int { return a % b },
	}
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl, err := template.New(filepath.Base(f)).Funcs(funcs).Parse(string(text))
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, map[string]int{"Services": services, "Instances": services}); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = b.Bytes()
	}
	return out
}

// errStrings renders errors one per line, for comparisons.
func errStrings(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// asError returns the *ingest.Error in err, failing the test if there is
// none or it has no position.
func asError(tb testing.TB, err error) *ingest.Error {
	tb.Helper()
	var e *ingest.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %q (%T) is not an *ingest.Error", err, err)
	}
	if e.Pos.File == "" || e.Pos.Line <= 0 {
		tb.Fatalf("error %q has no position: %+v", err, e.Pos)
	}
	return e
}
