package ingest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// -update rewrites docs/compatibility.md (TestLedgerDoc); the package's
// external tests define the same flag for their golden files.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func ledgerUpdating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestLedgerComplete walks the descriptors of every Istio kind's spec: a
// field with no entry (an istio.io/api upgrade added it) fails, as does an
// entry naming a field no kind reaches any more, or an entry that is
// malformed.
func TestLedgerComplete(t *testing.T) {
	for _, k := range ledgerKinds() {
		for _, r := range ledgerRows(k) {
			if !r.Known {
				t.Errorf("%s %s (%s) is not in the ledger: classify it in ingest/ledger_networking.go, ledger_security.go or ledger_mesh.go",
					ledgerKindName(k), r.Path, r.Field.FullName())
			}
		}
	}
	reach := reachableFields()
	for name, e := range ledgerEntries {
		if reach[name] == nil {
			t.Errorf("ledger entry %s names a field no kind reads (removed or renamed in istio.io/api?)", name)
		}
		checkLedgerEntry(t, string(name), e)
	}
	for k, table := range ledgerOverrides {
		for name, e := range table {
			if !reach[name][k] {
				t.Errorf("ledger override %s %s names a field %s does not read", k, name, k)
			}
			checkLedgerEntry(t, k.String()+" "+string(name), e)
		}
	}
	if n := len(networkingLedger) + len(securityLedger) + len(meshLedger) + len(envoyFilterLedger) + len(wasmPluginLedger) + len(telemetryLedger); len(ledgerEntries) != n {
		t.Errorf("%d entries, want %d: a field is in both tables", len(ledgerEntries), n)
	}
}

func checkLedgerEntry(t *testing.T, name string, e LedgerEntry) {
	t.Helper()
	switch e.Support {
	case Honoured:
		if e.Test == "" {
			t.Errorf("%s: honoured without a test", name)
		}
	case Partial:
		if e.Test == "" || e.Note == "" {
			t.Errorf("%s: partial needs a test and a caveat", name)
		}
	case NotSupported:
		if e.Note == "" || e.Test != "" {
			t.Errorf("%s: unsupported needs a reason and no test", name)
		}
		if msg := e.message(); len(msg) > maxWarningLen {
			t.Errorf("%s: warning %q is %d bytes, over %d", name, msg, len(msg), maxWarningLen)
		}
		if e.values != nil {
			t.Errorf("%s: unsupported with a value warning: every value is warned about", name)
		}
	default:
		t.Errorf("%s: no support level", name)
	}
	if w := e.values; w != nil {
		if w.applies == nil || w.when == "" || w.why == "" || w.effect == "" {
			t.Errorf("%s: value warning needs applies, when, why and effect", name)
		}
		if msg := w.message(); len(msg) > maxWarningLen {
			t.Errorf("%s: value warning %q is %d bytes, over %d", name, msg, len(msg), maxWarningLen)
		}
	}
}

// TestLedgerTestsExist checks that every test the ledger names exists:
// `func TestName(` in the named package's test files, and for
// engine.TestScenarios/NAME the scenario file.
func TestLedgerTestsExist(t *testing.T) {
	root := repoRoot(t)
	names := map[string]bool{}
	add := func(e LedgerEntry) {
		if e.Test != "" {
			names[e.Test] = true
		}
	}
	for _, e := range ledgerEntries {
		add(e)
	}
	for _, table := range ledgerOverrides {
		for _, e := range table {
			add(e)
		}
	}
	sources := map[string]string{} // package dir → its test files' text
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	}) {
		pkg, rest, ok := strings.Cut(name, ".")
		if !ok {
			t.Errorf("test %q: want pkg.TestName", name)
			continue
		}
		fn, sub, _ := strings.Cut(rest, "/")
		dir := pkg
		if pkg == "main" {
			dir = filepath.Join("cmd", "pilotfish")
		}
		text, ok := sources[dir]
		if !ok {
			files, _ := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
			var b strings.Builder
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(data)
			}
			text = b.String()
			sources[dir] = text
		}
		if !regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(fn) + `\(`).MatchString(text) {
			t.Errorf("ledger names test %s: no func %s( in %s/*_test.go", name, fn, dir)
		}
		if pkg == "engine" && fn == "TestScenarios" {
			if _, err := os.Stat(filepath.Join(root, "internal", "scenario", "testdata", sub+".txtar")); sub == "" || err != nil {
				t.Errorf("ledger names scenario %s: no internal/scenario/testdata/%s.txtar", name, sub)
			}
		}
	}
}

// TestLedgerDoc checks that docs/compatibility.md is what the ledger
// gives; -update rewrites it.
func TestLedgerDoc(t *testing.T) {
	path := filepath.Join(repoRoot(t), "docs", "compatibility.md")
	want := ledgerMarkdown()
	if ledgerUpdating() {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with `go test ./ingest -run TestLedgerDoc -update`)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/compatibility.md is not what the ledger gives: run `go test ./ingest -run TestLedgerDoc -update` and commit it")
	}
}

// TestLedgerCompiled checks what Unsupported walks: every unsupported
// field a kind reaches, and every field with a value warning, is among the
// fields of its message, and the spec leads to it.
func TestLedgerCompiled(t *testing.T) {
	c := compiledLedger()
	for _, k := range ledgerKinds() {
		kl := c[k]
		if kl == nil {
			t.Fatalf("%s not compiled", k)
		}
		want := 0
		for _, r := range ledgerRows(k) {
			if !r.Known || r.Entry.Support != NotSupported && r.Entry.values == nil {
				continue
			}
			want++
			found := false
			for _, f := range kl.messages[r.Field.ContainingMessage()] {
				found = found || (f.fd == r.Field && (f.entry != nil || f.values == r.Entry.values))
			}
			if !found {
				t.Errorf("%s %s unsupported (or value-checked) but not compiled", k, r.Path)
			}
		}
		if want > 0 && len(kl.messages[specDescriptor(k)]) == 0 {
			t.Errorf("%s: the spec leads to no unsupported field", k)
		}
	}
	// Kubernetes kinds have no ledger.
	if c[KindService] != nil {
		t.Error("Service compiled")
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
