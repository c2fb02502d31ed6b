package ingest_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// -update rewrites the golden files. It is defined here unless another
// test file of the package's test binary already did.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata/golden")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestValidateGolden runs ValidatePaths on each broken manifest under
// testdata/validate and compares every message with
// testdata/golden/validate/NAME.golden. Regenerate with
// `go test ./ingest -run TestValidateGolden -update` and review the diff:
// each line must name file:line, the object, the field path, and read well.
func TestValidateGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/validate/*")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			r, err := ingest.ValidatePaths(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Errors) == 0 {
				t.Errorf("%s has no errors; every manifest here should be broken", in)
			}
			var b strings.Builder
			for _, e := range r.Errors {
				asError(t, e)
				fmt.Fprintln(&b, e)
			}
			fmt.Fprintf(&b, "# %d objects, %d errors\n", len(r.Objects), len(r.Errors))
			golden := filepath.Join("testdata/golden/validate", strings.TrimSuffix(name, filepath.Ext(name))+".golden")
			if updating() {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("%s differs from %s (run with -update and review the diff):\n got:\n%s\nwant:\n%s", in, golden, got, want)
			}
		})
	}
}

// TestValidatePaths covers the walk: directories recursively, extensions,
// hidden entries, symlinked files, sorting, and unreadable paths.
func TestValidatePaths(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ns := func(name string) string { return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n" }
	write("b.yaml", ns("b")+"---\n"+ns("Bad_B"))
	write("a/nested.yml", ns("nested"))
	write("a/deeper/c.json", `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_C"}}`)
	write("notes.txt", ns("ignored-by-extension"))
	write(".hidden/x.yaml", ns("Ignored_Hidden"))
	write("..2026_01_01/d.yaml", ns("ignored-configmap-copy"))
	write("explicit.txt", ns("explicit"))
	write("z-dup.yaml", "# again\n"+ns("nested"))
	if err := os.Symlink(filepath.Join(dir, "..2026_01_01/d.yaml"), filepath.Join(dir, "d.yaml")); err != nil {
		t.Fatal(err)
	}

	r, err := ingest.ValidatePaths(dir, filepath.Join(dir, "explicit.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range r.Objects {
		keys = append(keys, k.Name)
	}
	if got, want := strings.Join(keys, ","), "Bad_C,nested,b,Bad_B,ignored-configmap-copy,nested,explicit"; got != want {
		t.Errorf("objects %s, want %s", got, want)
	}
	rel := func(s string) string { return strings.ReplaceAll(s, dir+"/", "") }
	got := rel(errStrings(r.Errors))
	want := `a/deeper/c.json:1: Namespace Bad_C: metadata.name: invalid name "Bad_C": must be a DNS-1123 label (a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character)
b.yaml:9: Namespace Bad_B: metadata.name: invalid name "Bad_B": must be a DNS-1123 label (a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character)
z-dup.yaml:2: Namespace nested: also defined at a/nested.yml:1, which is used (the first definition in path order wins)
`
	if got != want {
		t.Errorf("errors:\n%s\nwant:\n%s", got, want)
	}
	if len(r.Files) != 6 {
		t.Errorf("files %v", r.Files)
	}

	if _, err := ingest.ValidatePaths(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("missing path: err = %v, want not-exist", err)
	}
}
