package archtest

import (
	"go/ast"
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
// not import (directly) and why. Every edge not listed is allowed.
// Subpackages inherit the rules of their top-level package.
var forbidden = map[string]map[string]string{
	"ingest": {
		"debug":   "sources feed the index; debug views are wired by cmd",
		"engine":  "sources feed the index; they know nothing about proxies or pushes",
		"rules":   "sources feed the index; what a proxy sees is decided downstream",
		"encode":  "sources know nothing about xDS",
		"serve":   "sources know nothing about the network",
		"ca":      "sources know nothing about certificates",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"encode": {
		"jwks":    "generators never fetch: a key set reaches them as an index row in their key",
		"debug":   "debug views are wired by cmd; generators know nothing of them",
		"ingest":  "generators see rows, never sources",
		"engine":  "generators are pure functions of their keys; engine calls them, not the reverse",
		"rules":   "generators are pure functions of their keys; rules fills the keys, not the reverse",
		"serve":   "generators know nothing about streams",
		"ca":      "generators reference secrets by name only",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"engine": {
		"jwks":    "a refreshed key set reaches engine as an index change, like any input",
		"debug":   "debug reads engine through the views engine exports, not the reverse",
		"ingest":  "engine reads the index; only ingest writes it",
		"serve":   "serve drives engine, not the reverse",
		"ca":      "engine pushes config; certificates are ca's and serve's business",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"rules": {
		"jwks":    "rules reads key sets from the index, never from the fetcher",
		"engine":  "rules says what a class sees; engine schedules pushes and calls rules, not the reverse",
		"debug":   "debug reads engine's views; rules knows nothing of them",
		"ingest":  "rules reads the index; only ingest writes it",
		"serve":   "rules knows nothing about streams",
		"ca":      "rules references secrets by name only",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"serve": {
		"debug":   "debug reads serve's stream registry and is registered on its HTTP server by cmd, not the reverse",
		"ingest":  "serve sees the mesh only through engine",
		"index":   "serve sees the mesh only through engine",
		"encode":  "serve sends bytes engine hands it; it never generates",
		"rules":   "serve sees the mesh only through engine",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"ca": {
		"debug":   "the CA stands alone: debug views are wired by cmd",
		"index":   "the CA stands alone: no mesh state",
		"ingest":  "the CA stands alone: no sources",
		"engine":  "the CA stands alone: no proxies",
		"rules":   "the CA stands alone: no proxies",
		"encode":  "the CA stands alone: no xDS",
		"serve":   "serve exposes the CA, not the reverse",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"debug": {
		"ingest":  "debug shows what engine and serve hold; sources are cmd's to wire",
		"ca":      "debug shows xDS state; the CA's state is its own",
		"loadgen": "loadgen is a black-box client; only cmd and bench use it",
		"bench":   "only cmd imports bench",
	},
	"cmd": {
		"index": "cmd is wiring only: the index's writer comes from ingest (ingest.NewIndexWriter), its reads go through engine",
		"encode": "cmd is wiring only: the mesh comes from engine.MeshSettings, cache counters through engine.CacheCounters, " +
			"debug output from debug",
	},
}

// alone lists the packages that import no other pilotfish package at all,
// and why: an allowlist, so that a package added later is forbidden to
// them too.
var alone = map[string]string{
	"index": "index is the bottom of the graph: sources write it, engine reads it, it knows neither",
	"inject": "sidecar injection is a pure function of the pod, the injector config and the mesh config: " +
		"no index, no xDS; cmd wires it to the webhook server",
	"loadgen": "loadgen measures pilotfish as a black box, as it would istiod: it uses protocol types " +
		"only, never engine, encode, serve or index",
	"jwks": "jwks is an outside input (key servers), like a Kubernetes watch: cmd wires its results to ingest, " +
		"which writes them to the index",
	"meshconfig": "the mesh config is an outside input read by istiod's rules: cmd hands what it parses to the " +
		"engine (as mesh settings), the sources and the injector",
	"envoypatch": "EnvoyFilter patches are compiled and applied to Envoy messages alone: ingest compiles them, " +
		"rules selects them, encode applies them; envoypatch knows none of them",
}

// aloneExcept lists the pilotfish packages a package of alone may still
// import, and why.
var aloneExcept = map[string]map[string]string{
	"inject": {"meshconfig": "one reading of the mesh config (istiod's defaults and merge rules) for the injector and the control plane"},
}

// forbiddenOutside lists, for a top-level package, module path prefixes
// outside pilotfish it must not import, and why.
var forbiddenOutside = map[string]map[string]string{
	"index": {
		"k8s.io/":      "index holds interned rows; Kubernetes objects are ingest's, converted before they reach it",
		"sigs.k8s.io/": "index holds interned rows; Kubernetes objects are ingest's, converted before they reach it",
		"istio.io/":    "index holds interned rows; a config row's Istio spec is opaque to it (an any ingest fills)",
	},
}

// testOnly lists the edges that test files may have although the table
// forbids them, and why. A test file of package p (package p or p_test)
// is otherwise held to p's rules.
var testOnly = map[string]map[string]string{
	"engine": {
		"ingest": "engine's tests build their index from manifests through ingest, as cmd wires them",
		"serve":  "an end-to-end test serves engine to grpc-go's xDS client through serve's ADS server",
	},
	"cmd": {
		"index":  "cmd's tests build small indexes and metrics registries directly",
		"encode": "cmd's tests compare against encode's builders (credential keys, the default mesh)",
	},
	"rules": {
		"ingest": "rules' tests build their index from manifests through ingest, as cmd wires them",
	},
	"debug": {
		"ingest": "debug's tests build their index from manifests through ingest, as cmd wires them",
	},
}

// goFile is one Go file of the repository.
type goFile struct {
	path, rel string // absolute; relative to the root, slash-separated
	from      string // its top-level package
	test      bool
}

// goFiles lists every Go file of the repository, tests included, but for
// testdata, tools and hidden directories.
func goFiles(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out []goFile
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		out = append(out, goFile{path: path, rel: rel, from: topLevel(rel), test: strings.HasSuffix(path, "_test.go")})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func parseFile(t *testing.T, f goFile, mode parser.Mode) *ast.File {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), f.path, nil, mode)
	if err != nil {
		t.Fatal(err)
	}
	return af
}

// TestImportRules walks every Go file of the repository, test files
// included, and fails on any import that DESIGN.md forbids, naming the file
// and the reason.
func TestImportRules(t *testing.T) {
	checked, tests := 0, 0
	for _, f := range goFiles(t) {
		af := parseFile(t, f, parser.ImportsOnly)
		checked++
		if f.test {
			tests++
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, v := range violations(f.from, p, f.test) {
				t.Errorf("%s: %s", f.rel, v)
			}
		}
	}
	if checked == 0 || tests == 0 {
		t.Fatalf("%d Go files checked, %d of them tests: the walk is broken", checked, tests)
	}
}

// TestForbiddenTableCoversDesign guards the tables themselves: every
// package that has rules must exist on disk, so a rename cannot silently
// disable its rules.
func TestForbiddenTableCoversDesign(t *testing.T) {
	pkgs := map[string]bool{}
	for pkg := range forbidden {
		pkgs[pkg] = true
	}
	for pkg := range alone {
		pkgs[pkg] = true
		if forbidden[pkg] != nil {
			t.Errorf("package %s is in both forbidden and alone", pkg)
		}
	}
	for pkg := range forbiddenOutside {
		pkgs[pkg] = true
	}
	for pkg, edges := range testOnly {
		pkgs[pkg] = true
		for to := range edges {
			if forbidden[pkg][to] == "" {
				t.Errorf("testOnly allows %s -> %s, which is not forbidden", pkg, to)
			}
		}
	}
	for pkg := range pkgs {
		if pkg == "cmd" { // commands: a main package per directory, no doc.go at the top
			if mains, _ := filepath.Glob(filepath.Join("../..", pkg, "*", "main.go")); len(mains) == 0 {
				t.Errorf("cmd has import rules but no cmd/*/main.go")
			}
			continue
		}
		if _, err := os.Stat(filepath.Join("../..", pkg, "doc.go")); err != nil {
			t.Errorf("package %s has import rules but no %s/doc.go: %v", pkg, pkg, err)
		}
	}
}

// violations returns why package from may not import path, if it may not;
// test says whether the importing file is a test.
func violations(from, path string, test bool) []string {
	if !strings.HasPrefix(path, module+"/") {
		var out []string
		for prefix, why := range forbiddenOutside[from] {
			if strings.HasPrefix(path, prefix) {
				out = append(out, "imports "+path+": forbidden ("+from+" -> "+strings.TrimSuffix(prefix, "/")+"): "+why)
			}
		}
		return out
	}
	rest := strings.TrimPrefix(path, module+"/")
	to, _, _ := strings.Cut(rest, "/")
	var out []string
	if (rest == "internal/kubetest" || strings.HasPrefix(rest, "internal/kubetest/")) && from != "internal" && !test {
		out = append(out, "imports "+path+": the Kubernetes test harness runs processes; only tests import it")
	}
	if rest == "internal/testcert" && from != "internal" && !test {
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
	if why, ok := alone[from]; ok && aloneExcept[from][to] == "" {
		out = append(out, "imports "+path+": forbidden ("+from+" imports no pilotfish package): "+why)
	}
	if why, bad := forbidden[from][to]; bad && !(test && testOnly[from][to] != "") {
		out = append(out, "imports "+path+": forbidden ("+from+" -> "+to+"): "+why)
	}
	return out
}

// TestViolations checks the checker on known edges, so TestImportRules
// cannot pass by checking nothing.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		from, path string
		test, bad  bool
	}{
		{"index", module + "/engine", false, true},
		{"inject", module + "/meshconfig", false, false},
		{"inject", module + "/ingest", false, true},
		{"meshconfig", module + "/inject", false, true},
		{"index", module + "/engine", true, true},
		{"index", module + "/internal/testcert", true, true},
		{"index", "k8s.io/api/core/v1", false, true},
		{"index", "istio.io/api/networking/v1alpha3", true, true},
		{"index", "github.com/cespare/xxhash/v2", false, false},
		{"ingest", "k8s.io/api/core/v1", false, false},
		{"encode", module + "/index", false, false},
		{"encode", module + "/engine/sub", false, true},
		{"encode", module + "/engine", true, true},
		{"serve", module + "/index", false, true},
		{"serve", module + "/index", true, true},
		{"serve", module + "/engine", false, false},
		{"engine", module + "/bench", false, true},
		{"engine", module + "/ingest", false, true},
		{"engine", module + "/ingest", true, false},
		{"cmd", module + "/bench", false, false},
		{"loadgen", module + "/serve", false, true},
		{"loadgen", module + "/index", true, true},
		{"loadgen", module + "/newpackage", false, true},
		{"loadgen", "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3", false, false},
		{"index", "google.golang.org/grpc", false, false},
		{"cmd", module + "/internal/kubetest", false, true},
		{"cmd", module + "/internal/kubetest", true, false},
		{"ingest", module + "/internal/kubetest", false, true},
		{"encode", module + "/internal/testcert", false, true},
		{"encode", module + "/internal/testcert", true, false},
		{"cmd", module + "/index", false, true},
		{"cmd", module + "/encode", false, true},
		{"cmd", module + "/encode", true, false},
		{"cmd", module + "/debug", false, false},
		{"debug", module + "/engine", false, false},
		{"debug", module + "/index", false, false},
		{"debug", module + "/ingest", false, true},
		{"debug", module + "/ingest", true, false},
		{"engine", module + "/debug", false, true},
		{"engine", module + "/debug", true, true},
		{"serve", module + "/debug", true, true},
		{"index", module + "/debug", false, true},
		{"ingest", module + "/debug", false, true},
		{"encode", module + "/debug", false, true},
		{"ca", module + "/debug", false, true},
		{"loadgen", module + "/debug", false, true},
		{"jwks", module + "/index", false, true},
		{"jwks", module + "/ingest", true, true},
		{"encode", module + "/jwks", false, true},
		{"cmd", module + "/jwks", false, false},
	} {
		if got := len(violations(tc.from, tc.path, tc.test)) > 0; got != tc.bad {
			t.Errorf("violations(%q, %q, test=%v) = %v, want bad=%v", tc.from, tc.path, tc.test,
				violations(tc.from, tc.path, tc.test), tc.bad)
		}
	}
}

func topLevel(rel string) string {
	if i := strings.IndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}
