package ingest

import (
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The field ledger says, for every field of every istio.io/api message
// pilotfish reads, what pilotfish does with it: honoured (naming the test
// that proves it), honoured with a documented caveat (partial), or not
// supported (why, and what happens instead). It is keyed by the protobuf
// full field name ("istio.networking.v1alpha3.HTTPMatchRequest.source_labels")
// in ledger_networking.go and ledger_security.go; a message reused by
// several kinds whose handling differs by kind has a per-kind override
// (ledgerOverrides). A field below an unsupported one needs no entry: its
// parent's warning covers it.
//
// One table serves every consumer: ledger_test.go walks the descriptors so
// that an unclassified field (an istio.io/api upgrade) or a stale entry
// fails CI and checks each named test exists; Unsupported (ledger_walk.go)
// turns the set fields of an object into warnings for `pilotfish validate`,
// the admission webhook, both sources' /debug/config_errors and the
// pilotfish_config_unsupported_fields metric; docs/compatibility.md is
// generated from it (ledger_doc.go).

// Support is what pilotfish does with a field.
type Support uint8

const (
	// Honoured: pilotfish translates the field as istiod does.
	Honoured Support = iota + 1
	// Partial: honoured, with a caveat the ledger documents (Note).
	Partial
	// NotSupported: the field has no effect in pilotfish (or the effect
	// Effect names); setting it gets a warning.
	NotSupported
)

func (s Support) String() string {
	switch s {
	case Honoured:
		return "honoured"
	case Partial:
		return "partial"
	case NotSupported:
		return "unsupported"
	}
	return "unclassified"
}

// LedgerEntry classifies one field.
type LedgerEntry struct {
	Support Support
	// Test proves the field is honoured: "pkg.TestName", optionally
	// "/subtest" (engine.TestScenarios/NAME runs
	// internal/scenario/testdata/NAME.txtar). Empty when NotSupported.
	Test string
	// Note is, for Partial, the caveat; for NotSupported, why (shown to
	// users in the warning). Optional for Honoured.
	Note string
	// Effect is, for NotSupported, what happens instead; "" means the
	// field is ignored.
	Effect string
	// values, for a Honoured or Partial field, picks out the values that
	// still have no effect in pilotfish: each gets a warning as an
	// unsupported field would.
	values *valueWarning
	// subtree: the entry covers its message's fields too (whole); they
	// are not walked.
	subtree bool
}

// valueWarning is a warning about some values of a supported field.
type valueWarning struct {
	// applies reports whether a set value of the field (a message, or a
	// list or map of them) is one pilotfish cannot honour. It runs for
	// every object setting the field: it must not allocate.
	applies func(protoreflect.Value) bool
	// when says which values, for docs/compatibility.md.
	when string
	// why and effect make the warning, as Note and Effect do.
	why, effect string
}

// message is the warning's text (checked against maxWarningLen).
func (v *valueWarning) message() string {
	return "not supported by pilotfish: " + v.why + "; " + v.effect
}

// message is the warning's text for an unsupported field (checked
// against maxWarningLen).
func (e *LedgerEntry) message() string {
	return "not supported by pilotfish: " + e.Note + "; " + e.effect()
}

// effect is what a warning says happens to an unsupported field.
func (e *LedgerEntry) effect() string {
	if e.Effect != "" {
		return e.Effect
	}
	return "the field is ignored"
}

// Constructors for the tables.
func honoured(test string) LedgerEntry { return LedgerEntry{Support: Honoured, Test: test} }

func honouredNote(test, note string) LedgerEntry {
	return LedgerEntry{Support: Honoured, Test: test, Note: note}
}

func partial(test, caveat string) LedgerEntry {
	return LedgerEntry{Support: Partial, Test: test, Note: caveat}
}

func unsupported(why string) LedgerEntry { return LedgerEntry{Support: NotSupported, Note: why} }

// warnWhen adds to a supported entry a warning about some of its values.
func (e LedgerEntry) warnWhen(w valueWarning) LedgerEntry {
	e.values = &w
	return e
}

// unsupportedDoes is an unsupported field whose presence does something
// other than nothing (a match that never applies, a route dropped).
func unsupportedDoes(why, effect string) LedgerEntry {
	return LedgerEntry{Support: NotSupported, Note: why, Effect: effect}
}

// ledgerTable maps a protobuf full field name to its entry.
type ledgerTable map[protoreflect.FullName]LedgerEntry

// ledgerEntries is the whole table: every kind's fields.
var ledgerEntries = func() ledgerTable {
	t := make(ledgerTable, len(networkingLedger)+len(securityLedger)+len(meshLedger)+len(envoyFilterLedger)+len(wasmPluginLedger)+len(telemetryLedger))
	for _, part := range []ledgerTable{networkingLedger, securityLedger, meshLedger, envoyFilterLedger, wasmPluginLedger, telemetryLedger} {
		for k, e := range part {
			t[k] = e
		}
	}
	return t
}()

// ledgerKinds are the kinds whose spec the ledger covers: the Istio kinds
// pilotfish reads, in Kind order, then the mesh config's roots
// (ledger_mesh.go).
func ledgerKinds() []Kind {
	var out []Kind
	for k := KindUnknown + 1; k < numKinds; k++ {
		if kinds[k].istio() {
			out = append(out, k)
		}
	}
	return append(out, kindMeshConfig, kindMeshNetworks)
}

// specDescriptor is the descriptor of an Istio kind's spec message.
func specDescriptor(k Kind) protoreflect.MessageDescriptor {
	if k >= numKinds {
		return meshRootDescriptor(k)
	}
	return kinds[k].newObject().(proto.Message).ProtoReflect().Descriptor()
}

// LedgerLookup returns the entry of a field as read in an object of kind
// k, and whether it is classified.
func LedgerLookup(k Kind, fd protoreflect.FieldDescriptor) (LedgerEntry, bool) {
	if o, ok := ledgerOverrides[k][fd.FullName()]; ok {
		return o, true
	}
	e, ok := ledgerEntries[fd.FullName()]
	return e, ok
}

// wellKnown reports whether a message is one of protobuf's well-known
// types (Duration, wrappers, Struct): a value, not a subtree to classify.
func wellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

// fieldMessage is the message a field holds (a map's value), or nil for a
// scalar, an enum or a well-known type.
func fieldMessage(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	md := fd.Message()
	if fd.IsMap() {
		md = fd.MapValue().Message()
	}
	if md == nil || wellKnown(md) {
		return nil
	}
	return md
}

// ledgerRow is one field as a kind reads it, for the checks and the doc.
type ledgerRow struct {
	Path  string // JSON path with [] for lists and maps: "spec.http[].match[].sourceLabels"
	Field protoreflect.FieldDescriptor
	Entry LedgerEntry
	Known bool // classified
	// SameAs is, for a message already listed at another path of the
	// kind, that path: the row stands for its whole subtree.
	SameAs string
}

// ledgerRows walks kind k's spec in declaration order through message
// fields, stopping below unsupported fields and at messages already
// walked (SameAs).
func ledgerRows(k Kind) []ledgerRow {
	var rows []ledgerRow
	seen := map[protoreflect.FullName]string{}
	var walk func(md protoreflect.MessageDescriptor, path string)
	walk = func(md protoreflect.MessageDescriptor, path string) {
		seen[md.FullName()] = path
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			p := path + "." + fd.JSONName()
			if fd.IsList() || fd.IsMap() {
				p += "[]"
			}
			e, ok := LedgerLookup(k, fd)
			row := ledgerRow{Path: p, Field: fd, Entry: e, Known: ok}
			sub := fieldMessage(fd)
			if e.subtree {
				sub = nil
			}
			if sub != nil && ok && e.Support != NotSupported {
				if prev, dup := seen[sub.FullName()]; dup {
					row.SameAs = prev
					sub = nil
				}
			}
			rows = append(rows, row)
			if sub != nil && ok && e.Support != NotSupported {
				walk(sub, p)
			}
		}
	}
	walk(specDescriptor(k), ledgerTop(k))
	return rows
}

// reachableFields lists every field reachable from any kind's spec,
// through every message field (supported or not): what an entry may name.
func reachableFields() map[protoreflect.FullName]map[Kind]bool {
	out := map[protoreflect.FullName]map[Kind]bool{}
	for _, k := range ledgerKinds() {
		seen := map[protoreflect.FullName]bool{}
		var walk func(md protoreflect.MessageDescriptor)
		walk = func(md protoreflect.MessageDescriptor) {
			if seen[md.FullName()] {
				return
			}
			seen[md.FullName()] = true
			fields := md.Fields()
			for i := 0; i < fields.Len(); i++ {
				fd := fields.Get(i)
				if out[fd.FullName()] == nil {
					out[fd.FullName()] = map[Kind]bool{}
				}
				out[fd.FullName()][k] = true
				if sub := fieldMessage(fd); sub != nil {
					walk(sub)
				}
			}
		}
		walk(specDescriptor(k))
	}
	return out
}

// kindLedger is what Unsupported needs of one kind, computed once: for
// each message reachable from its spec with an unsupported field (or a
// field with a value warning) somewhere below it, the fields worth looking
// at (those, and those leading to one). A message without any is absent:
// the walk skips it without looking at its fields.
type kindLedger struct {
	messages map[protoreflect.MessageDescriptor][]ledgerField
}

// ledgerField is a field the walk looks at: unsupported (entry), or one
// whose values are checked (values), descended into (descend), or both.
type ledgerField struct {
	fd      protoreflect.FieldDescriptor
	entry   *LedgerEntry
	values  *valueWarning
	descend bool
}

var compiledLedger = sync.OnceValue(func() *[numLedgerKinds]*kindLedger {
	var out [numLedgerKinds]*kindLedger
	for _, k := range ledgerKinds() {
		kl := &kindLedger{messages: map[protoreflect.MessageDescriptor][]ledgerField{}}
		done := map[protoreflect.MessageDescriptor]bool{}
		var walk func(md protoreflect.MessageDescriptor) bool
		walk = func(md protoreflect.MessageDescriptor) bool {
			if done[md] {
				return len(kl.messages[md]) > 0
			}
			done[md] = true // a recursive message stops here
			var fields []ledgerField
			all := md.Fields()
			for i := 0; i < all.Len(); i++ {
				fd := all.Get(i)
				e, ok := LedgerLookup(k, fd)
				if ok && e.Support == NotSupported {
					fields = append(fields, ledgerField{fd: fd, entry: &e})
					continue
				}
				// An unclassified field is left alone here (the CI test
				// fails on it); what is below it is still checked.
				f := ledgerField{fd: fd, values: e.values}
				if sub := fieldMessage(fd); sub != nil && !e.subtree && walk(sub) {
					f.descend = true
				}
				if f.values != nil || f.descend {
					fields = append(fields, f)
				}
			}
			if len(fields) > 0 {
				kl.messages[md] = fields
			}
			return len(fields) > 0
		}
		walk(specDescriptor(k))
		out[k] = kl
	}
	return &out
})

// LedgerCount is how many fields of a kind's spec (by JSON path, a
// repeated message counted once) are honoured, partial or unsupported.
type LedgerCount struct {
	Kind                           string
	Honoured, Partial, Unsupported int
}

// LedgerCounts returns the ledger's counts per kind, in Kind order.
func LedgerCounts() []LedgerCount {
	var out []LedgerCount
	for _, k := range ledgerKinds() {
		c := LedgerCount{Kind: ledgerKindName(k)}
		for _, r := range ledgerRows(k) {
			if r.SameAs != "" {
				continue
			}
			switch r.Entry.Support {
			case Honoured:
				c.Honoured++
			case Partial:
				c.Partial++
			case NotSupported:
				c.Unsupported++
			}
		}
		out = append(out, c)
	}
	return out
}

// unimplementedKinds lists the mesh kinds pilotfish does not implement
// (kinds_unknown.go: a warning each), as "group/Kind", sorted.
func unimplementedKinds() []string {
	var out []string
	for group, g := range knownGroups() {
		for kind, c := range g.class {
			if c == kindUnimplemented {
				out = append(out, group+"/"+kind)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		gi, ki, _ := strings.Cut(out[i], "/")
		gj, kj, _ := strings.Cut(out[j], "/")
		if gi != gj {
			return gi < gj
		}
		return ki < kj
	})
	return out
}
