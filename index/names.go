package index

import "sync/atomic"

// Names is the read-only view of one writer's symbol and label-set tables
// that generators are given (package encode): it resolves what rows and
// keys hold, and nothing else. A Sym or LabelSetID, once issued, resolves to
// the same value forever, so every answer of a Names is a fixed function of
// its argument: unlike [Symbols.Lookup], no answer depends on which strings
// have been interned yet, and a Names cannot intern. It is a small value
// (two pointers); the zero Names resolves only the zero Sym and the empty
// label set.
type Names struct {
	syms   *Symbols
	labels *LabelSets
}

// Names returns the view of the snapshot's symbol and label-set tables.
func (s *Snapshot) Names() Names { return Names{s.Symbols, s.Labels} }

// Names returns the view of the writer's symbol and label-set tables.
func (w *Writer) Names() Names { return Names{w.syms, w.labels} }

// String returns the string of id.
func (n Names) String(id Sym) string {
	if n.syms == nil && id == 0 {
		return ""
	}
	return n.syms.String(id)
}

// Labels returns the sorted labels of id. The slice is shared: never
// modify it.
func (n Names) Labels(id LabelSetID) []Label {
	if n.labels == nil && id == 0 {
		return nil
	}
	return n.labels.Get(id)
}

// Matches reports whether every label of selector is in labels (see
// [LabelSets.Matches]).
func (n Names) Matches(selector, labels LabelSetID) bool {
	if selector == 0 || selector == labels {
		return true
	}
	return n.labels.Matches(selector, labels)
}

// ID identifies the tables behind n within the process (0 for the zero
// Names): Syms and label-set IDs of different writers may be equal and mean
// different strings, so whatever caches by them keeps writers apart by it.
func (n Names) ID() uint64 {
	if n.syms == nil {
		return 0
	}
	return n.syms.id
}

// symbolTables numbers symbol tables for Names.ID.
var symbolTables atomic.Uint64

// NamesOf returns the view of a symbol table and a label-set table (nil
// for none), for code that holds the tables themselves (tests).
func NamesOf(syms *Symbols, labels *LabelSets) Names { return Names{syms, labels} }
