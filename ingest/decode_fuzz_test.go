package ingest_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// yamlLines counts line breaks as YAML does: LF, CRLF, CR, NEL, LS, PS.
func yamlLines(data []byte) int {
	n := 1
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	for _, r := range s {
		switch r {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}

// FuzzDecode feeds arbitrary bytes to Decode and Validate: they must never
// panic, every error and warning must be an *ingest.Error located in the
// input (warnings, and only they, IsWarning), and decoding must be
// deterministic (Decode's errors are DecodeWithWarnings'). The seeds are every manifest under
// testdata/ and examples/, and Istio's benchmark workloads rendered at Services=2.
//
// Each new interesting input is minimized before fuzzing goes on, for up
// to -fuzzminimizetime (60s by default); with kilobyte-sized manifests as
// seeds that stalls short runs, so run it as
//
//	go test ./ingest -run '^$' -fuzz FuzzDecode -fuzztime 5m -fuzzminimizetime 5s
func FuzzDecode(f *testing.F) {
	var seeds []string
	for _, pattern := range []string{"testdata/*/*.yaml", "testdata/*/*.json", "../examples/*.yaml", "../examples/*/*.yaml"} {
		m, _ := filepath.Glob(pattern)
		seeds = append(seeds, m...)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// A gateway credential Secret: data (base64), stringData, a bad key.
	// Kinds not read: a misspelling, one not implemented, one not mesh
	// config, in a List.
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: networking.istio.io/v1, kind: VirtualServize, metadata: {name: a}}\n" +
		"- {apiVersion: networking.istio.io/v1beta1, kind: ProxyConfig, metadata: {name: b}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n"))
	f.Add([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: gw-cert, namespace: gw}\ntype: kubernetes.io/tls\n" +
		"data: {tls.crt: Q0VSVA==, tls.key: S0VZ, bad key: eA==}\nstringData: {ca.crt: CA}\n"))
	f.Add([]byte(unsupportedConfig)) // fields of the ledger's unsupported ones (ledger_walk_test.go)
	if workloads := benchWorkloads(f, 2); workloads != nil {
		names := make([]string, 0, len(workloads))
		for name := range workloads {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			f.Add(workloads[name])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz.yaml"
		// Lines as YAML counts them; an error at the end of input may be
		// on the line after the last.
		lines := yamlLines(data) + 1
		check := func(errs []error) {
			for _, err := range errs {
				var e *ingest.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %q (%T) is not an *ingest.Error", err, err)
				}
				if e.Pos.File != file || e.Pos.Line < 1 || e.Pos.Line > lines {
					t.Fatalf("error %q at %v, outside the input's %d lines", err, e.Pos, lines)
				}
				if e.Unwrap() == nil {
					t.Fatalf("error %q wraps no sentinel", err)
				}
			}
		}
		objs, errs, warns := ingest.DecodeWithWarnings(file, data)
		check(errs)
		check(warns)
		for _, w := range warns {
			if !ingest.IsWarning(w) {
				t.Fatalf("warning %q is not IsWarning", w)
			}
		}
		for _, e := range errs {
			if ingest.IsWarning(e) {
				t.Fatalf("error %q is a warning", e)
			}
		}
		var all []string
		for i := range objs {
			o := &objs[i]
			if o.Kind == ingest.KindUnknown || o.Spec == nil || o.Pos.Line < 1 || o.Pos.Line > lines {
				t.Fatalf("bad object %v at %v with spec %T", o.Key(), o.Pos, o.Spec)
			}
			verrs := ingest.Validate(o)
			check(verrs)
			// The field ledger's walk: warnings only, each one Decode
			// reported too (at the same line: Unsupported finds it again
			// from the object's source text).
			for _, w := range ingest.Unsupported(o) {
				if !ingest.IsWarning(w) || !slices.ContainsFunc(warns, func(d error) bool { return d.Error() == w.Error() }) {
					t.Fatalf("Unsupported gave %q, not among Decode's warnings %q", w, errStrings(warns))
				}
			}
			for _, e := range verrs {
				all = append(all, e.Error())
			}
		}
		// Deterministic: the same input decodes to the same objects, hashes
		// and errors.
		objs2, errs2 := ingest.Decode(file, data)
		if len(objs2) != len(objs) || errStrings(errs2) != errStrings(errs) {
			t.Fatalf("second decode differs: %d objects, errors\n%s\nvs\n%s", len(objs2), errStrings(errs2), errStrings(errs))
		}
		var all2 []string
		for i := range objs2 {
			if objs2[i].Hash != objs[i].Hash || objs2[i].Key() != objs[i].Key() {
				t.Fatalf("object %d differs between decodes: %v %x vs %v %x", i, objs2[i].Key(), objs2[i].Hash, objs[i].Key(), objs[i].Hash)
			}
			for _, e := range ingest.Validate(&objs2[i]) {
				all2 = append(all2, e.Error())
			}
		}
		if !slices.Equal(all, all2) {
			t.Fatalf("validation differs between runs:\n%v\nvs\n%v", all, all2)
		}
	})
}
