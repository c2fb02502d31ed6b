package ingest

import (
	"errors"
	"slices"
)

// When several documents define one object (same kind, namespace and
// name), the first in path order (comparePaths), then in file order, is
// the definition: a pure function of the directory's contents, so a
// running server, a restarted one, every replica and `pilotfish validate`
// agree whatever order the files were written or read in. A document
// defines its object even when it is invalid or does not decode (as long
// as its errors name the object): a broken first definition is not
// silently replaced by a later one, it is reported, and the running
// server keeps its last good version. Every later definition is reported
// as a conflict naming both places; when the first is deleted, the next
// one takes over.

// definition is one object a file defines.
type definition struct {
	key   ObjectKey
	pos   Position
	obj   *Object // nil when the document did not decode
	valid bool    // decoded, and Validate found nothing
}

// fileDefinitions validates a file's decoded objects and lists the objects
// the file defines, once each, in file order. errs are its decode errors;
// out adds the validation errors and a conflict for each later definition
// of an object in the same file.
func fileDefinitions(objs []Object, errs []error) (defs []definition, out []error) {
	out = errs
	for i := range objs {
		o := &objs[i]
		verrs := Validate(o)
		out = append(out, verrs...)
		defs = append(defs, definition{key: o.Key(), pos: o.Pos, obj: o, valid: len(verrs) == 0})
	}
	// A document that did not decode defines the object its errors name,
	// at the line of its first error.
	broken := map[ObjectKey]Position{}
	for _, err := range errs {
		k, ok := errorObjectKey(err)
		if !ok {
			continue
		}
		var e *Error
		errors.As(err, &e)
		if p, seen := broken[k]; !seen || e.Pos.Line < p.Line {
			broken[k] = e.Pos
		}
	}
	for k, p := range broken {
		defs = append(defs, definition{key: k, pos: p})
	}
	slices.SortStableFunc(defs, func(a, b definition) int { return a.pos.Line - b.pos.Line })
	seen := make(map[ObjectKey]Position, len(defs))
	n := 0
	for _, d := range defs {
		if first, dup := seen[d.key]; dup {
			if d.obj != nil { // a broken duplicate has its own errors already
				out = append(out, conflictError(d.key, d.pos, first))
			}
			continue
		}
		seen[d.key] = d.pos
		defs[n] = d
		n++
	}
	return defs[:n], out
}

// conflictError reports the definition at loser, which the one at winner
// takes precedence over.
func conflictError(k ObjectKey, loser, winner Position) error {
	return &Error{Pos: loser, Kind: k.Kind.String(), Namespace: k.Namespace, Name: k.Name, cause: ErrInvalid,
		Message: "also defined at " + winner.String() + ", which is used (the first definition in path order wins)"}
}

// shadowError reports the directory's definition at pos of an object the
// API server defines too (precedence.go).
func shadowError(k ObjectKey, pos Position) error {
	return &Error{Pos: pos, Kind: k.Kind.String(), Namespace: k.Namespace, Name: k.Name, cause: ErrInvalid,
		Message: "also defined by the Kubernetes API server, whose definition is used (the API server's wins over the config directory's)"}
}

// errorObjectKey is the object an error names, if it names one of a kind
// pilotfish reads.
func errorObjectKey(err error) (ObjectKey, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Name == "" || e.cause == ErrIgnored {
		return ObjectKey{}, false
	}
	for k := KindUnknown + 1; k < numKinds; k++ {
		if k.String() == e.Kind {
			return ObjectKey{Kind: k, Namespace: e.Namespace, Name: e.Name}, true
		}
	}
	return ObjectKey{}, false
}
