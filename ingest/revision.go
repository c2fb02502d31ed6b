package ingest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Revisions. A control plane with a revision (istiod's REVISION,
// pilotfish's --revision) reads the Istio config objects meant for it:
// those without an istio.io/rev label, which every revision reads, and
// those whose label names its revision. A control plane without a
// revision ("") reads them all. This is istiod's rule for its config
// store (config.LabelsInRevision, applied by its CRD client to every Istio
// kind), and it applies to the Istio kinds only: Services, EndpointSlices,
// Pods and Namespaces are read whatever their labels.
//
// Revision tags (istio.io/tag webhooks, kube_tags.go) do not select config:
// istiod's config store compares the label with the revision itself, and
// reads an object labelled with a tag name only if the revision has that
// name. istiod reads tags for Gateway API deployments and status, which
// pilotfish does not implement.

// labelRevision is the label naming the revision an object is meant for.
const labelRevision = "istio.io/rev"

// inRevision reports whether a control plane of revision rev reads an
// Istio object with these labels.
func inRevision(labels map[string]string, rev string) bool {
	v, labelled := labels[labelRevision]
	return !labelled || rev == "" || v == rev
}

// skippedObject is an Istio object a source does not read because its
// istio.io/rev names another revision.
type skippedObject struct {
	key ObjectKey
	rev string // its istio.io/rev
}

// maxSkippedShown bounds the objects a skip summary names.
const maxSkippedShown = 5

// revisionSummary is the warning that says which Istio objects a source
// does not read for their revision: one line however many there are (a
// cluster with two revisions has the other's whole config), naming the
// first few in key order. nil when there are none.
func revisionSummary(source string, rev string, skipped []skippedObject) error {
	if len(skipped) == 0 {
		return nil
	}
	slices.SortFunc(skipped, func(a, b skippedObject) int { return compareKeys(a.key, b.key) })
	var b strings.Builder
	for i, s := range skipped {
		if i == maxSkippedShown {
			fmt.Fprintf(&b, ", and %d more", len(skipped)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (istio.io/rev=%s)", s.key, s.rev)
	}
	return &Error{Pos: Position{File: source}, cause: ErrIgnored, Message: fmt.Sprintf(
		"%d Istio objects are not read: labelled for another revision than this control plane's %q: %s",
		len(skipped), rev, b.String())}
}

// revisionSkipError is the warning of an Istio object in a file that is
// not read for its revision: a directory is small and read by people, so
// each one is named at its line.
func revisionSkipError(o *Object, rev string) error {
	return &Error{Pos: o.Pos, Kind: o.Kind.String(), Namespace: o.Meta.Namespace, Name: o.Meta.Name, cause: ErrIgnored,
		Message: fmt.Sprintf("not read: labelled istio.io/rev=%s, and this control plane's revision is %q", o.Meta.Labels[labelRevision], rev)}
}

// dropOtherRevisions removes from objs the Istio objects a control plane
// of revision rev does not read, and from warns the warnings about them;
// it returns what is left and a warning for each object removed.
func dropOtherRevisions(objs []Object, warns []error, rev string) ([]Object, []error, []error) {
	if rev == "" {
		return objs, warns, nil
	}
	var skipped []error
	var gone map[ObjectKey]bool
	n := 0
	for i := range objs {
		o := &objs[i]
		if kinds[o.Kind].istio() && !inRevision(o.Meta.Labels, rev) {
			skipped = append(skipped, revisionSkipError(o, rev))
			if gone == nil {
				gone = map[ObjectKey]bool{}
			}
			gone[o.Key()] = true
			continue
		}
		objs[n] = *o
		n++
	}
	if len(gone) == 0 {
		return objs, warns, nil
	}
	clear(objs[n:])
	warns = slices.DeleteFunc(warns, func(err error) bool {
		var e *Error
		return errors.As(err, &e) && gone[ObjectKey{Kind: kindNamed(e.Kind), Namespace: e.Namespace, Name: e.Name}]
	})
	return objs[:n], warns, skipped
}

// kindNamed is the kind of that name, KindUnknown if none.
func kindNamed(name string) Kind {
	for k := KindUnknown + 1; k < numKinds; k++ {
		if k.String() == name {
			return k
		}
	}
	return KindUnknown
}
