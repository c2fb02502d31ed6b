package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/pilotfish-mesh/pilotfish"

// forbidden lists, for each top-level package, the pilotfish packages it must
// not import (directly, from non-test files) and why. Every edge not listed is
// allowed. Subpackages inherit the rules of their top-level package.
var forbidden = map[string]map[string]string{
	"index": {
		"ingest":  "index is the bottom of the graph; sources depend on it, never the reverse",
		"engine":  "index is the bottom of the graph; engine reads snapshots, index knows no proxies",
		"encode":  "index rows are generator inputs; index must not know how they are encoded",
		"serve":   "index must not know about the network",
		"ca":      "index must not know about certificates",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"ingest": {
		"engine":  "sources feed the index; they know nothing about proxies or pushes",
		"encode":  "sources know nothing about xDS",
		"serve":   "sources know nothing about the network",
		"ca":      "sources know nothing about certificates",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"encode": {
		"ingest":  "generators see rows, never sources",
		"engine":  "generators are pure functions of their keys; engine calls them, not the reverse",
		"serve":   "generators know nothing about streams",
		"ca":      "generators reference secrets by name only",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"engine": {
		"ingest":  "engine reads the index; only ingest writes it",
		"serve":   "serve drives engine, not the reverse",
		"ca":      "engine pushes config; certificates are ca's and serve's business",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"serve": {
		"ingest":  "serve sees the mesh only through engine",
		"index":   "serve sees the mesh only through engine",
		"encode":  "serve sends bytes engine hands it; it never generates",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"ca": {
		"index":   "the CA stands alone: no mesh state",
		"ingest":  "the CA stands alone: no sources",
		"engine":  "the CA stands alone: no proxies",
		"encode":  "the CA stands alone: no xDS",
		"serve":   "serve exposes the CA, not the reverse",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"loadgen": {
		"index":  "loadgen must measure pilotfish as a black box, as it would istiod",
		"ingest": "loadgen must measure pilotfish as a black box, as it would istiod",
		"engine": "loadgen must measure pilotfish as a black box, as it would istiod",
		"encode": "loadgen must measure pilotfish as a black box, as it would istiod",
		"serve":  "loadgen must measure pilotfish as a black box, as it would istiod",
		"ca":     "loadgen must measure pilotfish as a black box, as it would istiod",
		"bench":  "only cmd imports bench",
	},
}

// TestImportRules walks every non-test Go file of the repository and fails on
// any import that DESIGN.md forbids, naming the file and the reason.
func TestImportRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if name != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		from := topLevel(filepath.ToSlash(rel))
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, v := range violations(from, p) {
				t.Errorf("%s: %s", rel, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go files checked: the walk is broken")
	}
}

// TestForbiddenTableCoversDesign guards the table itself: every package of
// DESIGN.md that has rules must exist on disk, so a rename cannot silently
// disable its rules.
func TestForbiddenTableCoversDesign(t *testing.T) {
	for pkg := range forbidden {
		if _, err := os.Stat(filepath.Join("../..", pkg, "doc.go")); err != nil {
			t.Errorf("package %s has import rules but no %s/doc.go: %v", pkg, pkg, err)
		}
	}
}

// violations returns why package from may not import path, if it may not.
func violations(from, path string) []string {
	if !strings.HasPrefix(path, module+"/") {
		return nil
	}
	rest := strings.TrimPrefix(path, module+"/")
	to, _, _ := strings.Cut(rest, "/")
	var out []string
	if (rest == "internal/kubetest" || strings.HasPrefix(rest, "internal/kubetest/")) && from != "internal" {
		out = append(out, "imports "+path+": the Kubernetes test harness runs processes; only tests import it")
	}
	if rest == "internal/testcert" && from != "internal" {
		out = append(out, "imports "+path+": throwaway test certificates; only tests import them")
	}
	if to == from {
		return out
	}
	if to == "cmd" {
		out = append(out, "imports "+path+": nothing imports cmd; all wiring happens there")
	}
	if to == "bench" && from != "cmd" {
		out = append(out, "imports "+path+": only cmd imports bench")
	}
	if why, bad := forbidden[from][to]; bad {
		out = append(out, "imports "+path+": forbidden ("+from+" -> "+to+"): "+why)
	}
	return out
}

// TestViolations checks the checker on known edges, so TestImportRules
// cannot pass by checking nothing.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		from, path string
		bad        bool
	}{
		{"index", module + "/engine", true},
		{"encode", module + "/index", false},
		{"encode", module + "/engine/sub", true},
		{"serve", module + "/index", true},
		{"serve", module + "/engine", false},
		{"engine", module + "/bench", true},
		{"cmd", module + "/bench", false},
		{"loadgen", module + "/serve", true},
		{"index", "google.golang.org/grpc", false},
		{"cmd", module + "/internal/kubetest", true},
		{"ingest", module + "/internal/kubetest", true},
		{"encode", module + "/internal/testcert", true},
	} {
		if got := len(violations(tc.from, tc.path)) > 0; got != tc.bad {
			t.Errorf("violations(%q, %q) = %v, want bad=%v", tc.from, tc.path, violations(tc.from, tc.path), tc.bad)
		}
	}
}

func topLevel(rel string) string {
	if i := strings.IndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}
