package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// encode may use index's row types, and a read-only view of the index,
// nothing else: a generator's output may depend only on its key, and a
// table or snapshot in reach of a generator is an input no key declares.
// The rule is checked on the identifiers encode names from index
// (index.X), in its tests too.

// encodeRowTypes are the index types encode may use: the rows, their keys
// and the values in them. Constants of these types are allowed with them.
var encodeRowTypes = []string{
	"Config", "ConfigKey", "ConfigKind",
	"Service", "ServiceKey", "ServiceID", "Port", "Protocol", "Origin", "Resolution", "ExportTo",
	"Endpoint", "EndpointPort", "EndpointGroup", "EndpointShard", "Health", "TLSMode",
	"Workload", "WorkloadKey", "WorkloadKind", "Namespace",
	"Sym", "Label", "LabelSetID",
	"JWKS", // a ConfigJWKS row's Spec
}

// encodeReadOnlyView names index's read-only view, once it exists (issue
// 17 item 1): a generator may read it because its answers cannot depend on
// interning order or on any later snapshot.
var encodeReadOnlyView = []string{"Names"}

// encodeBeingRemoved are the identifiers encode uses today that the rule
// forbids, each still allowed here only until it goes: being removed by
// issue 17 item 1 ("keys hold values only"). Delete each entry when its
// last use goes (TestEncodeExemptionsAreUsed says when).
var encodeBeingRemoved = map[string]string{
	"Symbols":    "being removed by issue 17 item 1: keys hold *index.Symbols, a table that can be written (Intern) and whose Lookup answers depend on interning order",
	"LabelSets":  "being removed by issue 17 item 1: keys hold *index.LabelSets, a process-wide table",
	"NewSymbols": "being removed by issue 17 item 1: tests make a symbol table to build keys that hold one",
}

// encodeTestOnly are identifiers encode's tests may use to build their
// fixtures the way ingest builds rows, and why.
var encodeTestOnly = map[string]string{
	"NewWriter": "tests build rows through a Writer, as ingest does",
	"Writer":    "tests build rows through a Writer, as ingest does",
	"Batch":     "tests build rows through a Writer, as ingest does",
	"Snapshot":  "tests read the rows they built back from the Writer's snapshot",
	"NamesOf":   "tests build the read-only view over the tables they made",
}

// indexIdents lists, by identifier, the files that name it from index
// (index.X, whatever the import's local name).
func indexIdents(t *testing.T, f goFile) map[string]bool {
	t.Helper()
	af := parseFile(t, f, parser.SkipObjectResolution)
	local := ""
	for _, imp := range af.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/index" {
			local = "index"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	out := map[string]bool{}
	if local == "" {
		return out
	}
	if local == "." || local == "_" {
		t.Errorf("%s: imports index as %q: name it, so that the rule can see what it uses", f.rel, local)
		return out
	}
	// A local variable may shadow the import's name; encode has none
	// called index, and parsing without object resolution keeps this
	// check syntactic.
	ast.Inspect(af, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
				out[sel.Sel.Name] = true
			}
		}
		return true
	})
	return out
}

// indexConstTypes maps each exported constant of package index (its
// non-test files) to its declared type, "" when untyped.
func indexConstTypes(t *testing.T, files []goFile) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range files {
		if f.test || !strings.HasPrefix(f.rel, "index/") || strings.Count(f.rel, "/") != 1 {
			continue
		}
		af := parseFile(t, f, parser.SkipObjectResolution)
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			typ := "" // a spec with neither type nor values repeats the previous one's
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				switch {
				case vs.Type != nil:
					typ = ""
					if id, ok := vs.Type.(*ast.Ident); ok {
						typ = id.Name
					}
				case len(vs.Values) > 0:
					typ = ""
				}
				for _, n := range vs.Names {
					if n.IsExported() {
						out[n.Name] = typ
					}
				}
			}
		}
	}
	return out
}

// encodeIndexUses returns, for each identifier encode names from index,
// the files naming it, split into non-test and test files.
func encodeIndexUses(t *testing.T) (code, tests map[string][]string, consts map[string]string) {
	t.Helper()
	files := goFiles(t)
	code, tests = map[string][]string{}, map[string][]string{}
	for _, f := range files {
		if f.from != "encode" {
			continue
		}
		dst := code
		if f.test {
			dst = tests
		}
		for id := range indexIdents(t, f) {
			dst[id] = append(dst[id], f.rel)
		}
	}
	return code, tests, indexConstTypes(t, files)
}

// encodeMayUse reports whether encode may name index.id, and why not.
func encodeMayUse(id string, test bool, consts map[string]string) (ok bool, why string) {
	allowed := slices.Contains(encodeRowTypes, id) || slices.Contains(encodeReadOnlyView, id)
	if typ, isConst := consts[id]; isConst && slices.Contains(encodeRowTypes, typ) {
		allowed = true
	}
	switch {
	case allowed:
		return true, ""
	case encodeBeingRemoved[id] != "":
		return true, encodeBeingRemoved[id]
	case test && encodeTestOnly[id] != "":
		return true, encodeTestOnly[id]
	}
	return false, "encode may use index's row types and its read-only view only: a generator's output " +
		"must depend on its key alone, and a table, snapshot or writer in its reach is an input no key declares"
}

// TestEncodeUsesRowTypesOnly: encode names nothing of index but its row
// types (and the exemptions listed, each with its reason).
func TestEncodeUsesRowTypesOnly(t *testing.T) {
	code, tests, consts := encodeIndexUses(t)
	if len(code) == 0 || len(consts) == 0 {
		t.Fatalf("found %d identifiers of index in encode and %d constants in index: the walk is broken", len(code), len(consts))
	}
	for _, set := range []struct {
		uses map[string][]string
		test bool
	}{{code, false}, {tests, true}} {
		for _, id := range slices.Sorted(maps.Keys(set.uses)) {
			if ok, why := encodeMayUse(id, set.test, consts); !ok {
				for _, f := range set.uses[id] {
					t.Errorf("%s: uses index.%s: %s", f, id, why)
				}
			}
		}
	}
	var exempt []string
	for _, id := range slices.Sorted(maps.Keys(encodeBeingRemoved)) {
		if n := len(code[id]) + len(tests[id]); n > 0 {
			exempt = append(exempt, id+" ("+strconv.Itoa(n)+" files)")
		}
	}
	if len(exempt) > 0 {
		t.Logf("encode still uses, until issue 17 item 1 removes them: %s", strings.Join(exempt, ", "))
	}
}

// TestEncodeExemptionsAreUsed: an exemption nothing uses any more is
// deleted, so that the rule tightens as item 1 lands.
func TestEncodeExemptionsAreUsed(t *testing.T) {
	code, tests, _ := encodeIndexUses(t)
	for _, list := range []map[string]string{encodeBeingRemoved, encodeTestOnly} {
		for id := range list {
			if len(code[id])+len(tests[id]) == 0 {
				t.Errorf("encode no longer uses index.%s: delete its exemption", id)
			}
		}
	}
}

// TestEncodeMayUse checks the rule on known identifiers.
func TestEncodeMayUse(t *testing.T) {
	consts := map[string]string{"ProtocolHTTP": "Protocol", "Untyped": "", "ConfigSecret": "ConfigKind"}
	for _, tc := range []struct {
		id   string
		test bool
		ok   bool
	}{
		{"Service", false, true},
		{"ProtocolHTTP", false, true},
		{"ConfigSecret", false, true},
		{"Untyped", false, false},
		{"Snapshot", false, false},
		{"Snapshot", true, true},
		{"Writer", false, false},
		{"ServicesByHost", false, false},
		{"NewWriter", false, false},
	} {
		if ok, _ := encodeMayUse(tc.id, tc.test, consts); ok != tc.ok {
			t.Errorf("encodeMayUse(%s, test=%v) = %v, want %v", tc.id, tc.test, ok, tc.ok)
		}
	}
}
