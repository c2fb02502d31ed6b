package ingest

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Unsupported returns one warning (an *Error wrapping ErrIgnored, so
// IsWarning is true) for each field of the ledger's unsupported ones that
// o's spec sets, and for each supported field set to a value the ledger
// warns about (a policy whose targets attach it to waypoints only), naming
// the object and the field's JSON path ("spec.tcp[0].match[1].sourceSubnet")
// and, for an object decoded from a file, the field's line. Kubernetes
// kinds and objects that set no unsupported field give nil.
//
// It costs a walk of the set fields of the messages below which an
// unsupported field can be (the others are skipped by descriptor); an
// object that sets none allocates only for the lists and maps it descends
// into. DecodeWithWarnings calls it for every object; the Kubernetes source
// and the admission webhook call it after Validate.
func Unsupported(o *Object) []error {
	if o == nil {
		return nil
	}
	r := reporter{file: o.Pos.File, kind: o.Kind.String(), namespace: o.Meta.Namespace, name: o.Meta.Name,
		docLine: o.Pos.Line, src: o.src}
	return unsupportedFields(&r, o)
}

// unsupportedFields reports o's unsupported fields through r (whose
// document tree, when Decode has it at hand, gives the lines).
func unsupportedFields(r *reporter, o *Object) []error {
	if o.Kind >= numKinds {
		return nil
	}
	kl := compiledLedger()[o.Kind]
	m, ok := o.Spec.(proto.Message)
	if kl == nil || !ok {
		return nil
	}
	pm := m.ProtoReflect()
	if !pm.IsValid() {
		return nil
	}
	w := ledgerWalker{kl: kl, r: r}
	w.message(pm)
	return r.errs
}

// ledgerStep is one step of the path the walker is at.
type ledgerStep struct {
	fd    protoreflect.FieldDescriptor
	index int    // list element, or -1
	key   string // map key (when fd is a map)
}

// maxLedgerDepth bounds the walk (Istio's specs nest about eight deep; a
// recursive message would otherwise recurse as deep as its value).
const maxLedgerDepth = 32

type ledgerWalker struct {
	top   string // the paths' first step; "" is "spec"
	kl    *kindLedger
	r     *reporter
	depth int
	steps [maxLedgerDepth]ledgerStep
}

func (w *ledgerWalker) message(m protoreflect.Message) {
	if w.depth >= maxLedgerDepth {
		return
	}
	for _, f := range w.kl.messages[m.Descriptor()] {
		if !m.Has(f.fd) {
			continue
		}
		w.steps[w.depth] = ledgerStep{fd: f.fd, index: -1}
		w.depth++
		if f.entry != nil {
			w.report(f.entry.message())
		} else {
			v := m.Get(f.fd)
			if f.values != nil && f.values.applies(v) {
				w.report(f.values.message())
			}
			if f.descend {
				w.descend(f.fd, v)
			}
		}
		w.depth--
	}
}

// descend walks the message (or messages of the list or map) a field
// holds.
func (w *ledgerWalker) descend(fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	step := &w.steps[w.depth-1]
	switch {
	case fd.IsList():
		l := v.List()
		for i := 0; i < l.Len(); i++ {
			step.index = i
			w.message(l.Get(i).Message())
		}
	case fd.IsMap():
		mp := v.Map()
		keys := make([]string, 0, mp.Len())
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k.String())
			return true
		})
		slices.Sort(keys) // map order is random: warnings come out in key order
		for _, k := range keys {
			step.key = k
			w.message(mp.Get(protoreflect.ValueOfString(k).MapKey()).Message())
		}
	default:
		w.message(v.Message())
	}
}

// report adds the warning msg for the field the walker is at.
func (w *ledgerWalker) report(msg string) {
	top := w.top
	if top == "" {
		top = "spec"
	}
	var p *fieldPath
	p = p.f(top)
	var generic strings.Builder
	generic.WriteString(top)
	for i := 0; i < w.depth; i++ {
		s := &w.steps[i]
		p = p.f(s.fd.JSONName())
		generic.WriteByte('.')
		generic.WriteString(s.fd.JSONName())
		if i < w.depth-1 {
			switch {
			case s.fd.IsList():
				p = p.i(s.index)
				generic.WriteString("[]")
			case s.fd.IsMap():
				p = p.k(s.key)
				generic.WriteString("[]")
			}
		}
	}
	w.r.add(ErrIgnored, p, msg)
	last := w.r.errs[len(w.r.errs)-1].(*Error)
	last.unsupported = generic.String()
}

// UnsupportedUse is how many objects set one unsupported field, or are of
// one kind pilotfish does not implement.
type UnsupportedUse struct {
	Kind string // "VirtualService"; for an unimplemented kind, its name ("Telemetry")
	// Field is the field's path without indexes
	// ("spec.tcp[].match[].sourceSubnet"); "" for an unimplemented kind.
	Field   string
	Objects int
}

// CountUnsupported counts the objects behind the ledger's warnings among
// problems (as the sources' Errors return them), each object once per
// field however often it sets it, sorted by kind and field. Its labels
// are bounded: the ledger's fields and the unimplemented kinds are finite
// sets.
func CountUnsupported(problems []error) []UnsupportedUse {
	type use struct{ kind, field, ns, name string }
	seen := map[use]bool{}
	counts := map[[2]string]int{}
	for _, err := range problems {
		e, ok := err.(*Error)
		if !ok || e.unsupported == "" {
			continue
		}
		field := e.unsupported
		if field == unsupportedKind {
			field = ""
		}
		u := use{e.Kind, field, e.Namespace, e.Name}
		if seen[u] {
			continue
		}
		seen[u] = true
		counts[[2]string{e.Kind, field}]++
	}
	out := make([]UnsupportedUse, 0, len(counts))
	for k, n := range counts {
		out = append(out, UnsupportedUse{Kind: k[0], Field: k[1], Objects: n})
	}
	slices.SortFunc(out, func(a, b UnsupportedUse) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Field, b.Field)
	})
	return out
}
