package ingest

import (
	"fmt"
	"strings"
)

// ledgerMarkdown renders docs/compatibility.md from the ledger. The test
// TestLedgerDoc fails when the file differs; `go test ./ingest -run
// TestLedgerDoc -update` rewrites it.
func ledgerMarkdown() []byte {
	var b strings.Builder
	b.WriteString(`# Compatibility: what pilotfish does with each Istio field

<!-- Generated from the field ledger (ingest/ledger_networking.go,
ingest/ledger_security.go) by "go test ./ingest -run TestLedgerDoc -update".
Do not edit: CI fails when this file differs from what the ledger gives. -->

pilotfish reads Istio's configuration through the types of istio.io/api. Every
field of every message it reads is classified here, per kind:

- **honoured**: translated as istiod translates it; the test named proves it
  (` + "`pkg.TestName`" + `, or ` + "`engine.TestScenarios/NAME`" + ` for the scenario file
  internal/scenario/testdata/NAME.txtar).
- **partial**: honoured, with the caveat given.
- **unsupported**: pilotfish does not implement it. Nothing is accepted
  silently: an object that sets such a field gets a warning naming the object
  and the field path, with the reason and what happens instead.
  ` + "`pilotfish validate`" + ` prints it (exit status 0; ` + "`--strict`" + ` makes it an error), the
  admission webhook returns it in the AdmissionReview's warnings (kubectl
  prints them as "Warning:"), ` + "`/debug/config_errors`" + ` lists it for objects from
  the config directory and from the API server, and the gauge
  ` + "`pilotfish_config_unsupported_fields{kind,field}`" + ` counts the objects setting it.

A supported field some of whose values pilotfish cannot honour says which
("**warning** when ..."): setting it so gets the same warning.

A field below an unsupported one is not listed: the warning of its parent
covers it. A message met again at another path of the same kind is listed
once; the later path reads "same fields as" the first. A CI test
(ingest/ledger_test.go) walks the protobuf descriptors, so an unclassified
field (after an istio.io/api upgrade) or an entry naming a field that no
longer exists fails the build, as does a named test that does not exist.

`)
	counts := LedgerCounts()
	b.WriteString("## Summary\n\n| kind | fields | honoured | partial | unsupported |\n|---|---:|---:|---:|---:|\n")
	var total LedgerCount
	for _, c := range counts {
		n := c.Honoured + c.Partial + c.Unsupported
		fmt.Fprintf(&b, "| [%s](#%s) | %d | %d | %d | %d |\n", c.Kind, strings.ToLower(c.Kind), n, c.Honoured, c.Partial, c.Unsupported)
		total.Honoured += c.Honoured
		total.Partial += c.Partial
		total.Unsupported += c.Unsupported
	}
	fmt.Fprintf(&b, "| all kinds | %d | %d | %d | %d |\n\n", total.Honoured+total.Partial+total.Unsupported,
		total.Honoured, total.Partial, total.Unsupported)

	b.WriteString("## Kinds\n\nRead, in every API version listed (the Kubernetes kinds as the API server validates them; the Istio kinds field by field below):\n\n| kind | API versions |\n|---|---|\n")
	for k := KindUnknown + 1; k < numKinds; k++ {
		fmt.Fprintf(&b, "| %s | %s |\n", k, kinds[k].apiVersions())
	}
	b.WriteString("\nNot implemented: a document of one of these kinds gets a warning (\"not implemented by pilotfish; the object is ignored\") and is counted by the gauge with an empty `field` label. Other Kubernetes kinds (ConfigMap, Deployment, ...) and other projects' kinds are skipped silently; a misspelled kind of a mesh API group is an error.\n\n")
	for _, gk := range unimplementedKinds() {
		group, kind, _ := strings.Cut(gk, "/")
		if group == "" {
			group = "core"
		}
		fmt.Fprintf(&b, "- %s (%s)\n", kind, group)
	}
	b.WriteString("\n")

	for i, k := range ledgerKinds() {
		c := counts[i]
		fmt.Fprintf(&b, "## %s\n\n%s: %d honoured, %d partial, %d unsupported.\n\n", ledgerKindName(k), ledgerKindGroup(k),
			c.Honoured, c.Partial, c.Unsupported)
		b.WriteString("| field | support | test, or why not |\n|---|---|---|\n")
		for _, r := range ledgerRows(k) {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Path, supportCell(r), detailCell(r))
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

func supportCell(r ledgerRow) string {
	switch {
	case !r.Known:
		return "**unclassified**"
	case r.Entry.Support == NotSupported:
		return "**unsupported**"
	}
	return r.Entry.Support.String()
}

func detailCell(r ledgerRow) string {
	e := r.Entry
	var s string
	switch {
	case !r.Known:
		return ""
	case e.Support == NotSupported:
		s = e.Note + "; " + e.effect()
	case e.Note != "":
		s = "`" + e.Test + "`; " + e.Note
	default:
		s = "`" + e.Test + "`"
	}
	if w := e.values; w != nil {
		s += "; **warning** when " + w.when + ": " + w.why + "; " + w.effect
	}
	if r.SameAs != "" {
		s += "; same fields as `" + r.SameAs + "`"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
