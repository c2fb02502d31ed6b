package ingest

import "unsafe"

// refList is what the converter keeps per object: the rows it produced, in
// 40 bytes of map entry. Most objects (a Service, an EndpointSlice, a Pod,
// most Istio configs) produce one row, kept inline; a longer list lives in
// memory the object's rows already hold (a ServiceEntry's seOne) or in a
// slice of its own. One allocation per object fewer on the path every
// object takes, and no more map-entry bytes than a plain slice.
type refList struct {
	one  rowRef
	more []rowRef // the whole list when it has more than one ref
}

// keepRefs returns the list to store for refs (the scratch buffer, which
// the next object reuses), copying a longer list into home when it fits.
func keepRefs(refs, home []rowRef) refList {
	if len(refs) == 1 {
		return refList{one: refs[0]}
	}
	if cap(home) < len(refs) {
		home = make([]rowRef, 0, len(refs))
	}
	return refList{more: append(home[:0], refs...)}
}

func (l *refList) refs() []rowRef {
	if l.more != nil {
		return l.more
	}
	return unsafe.Slice(&l.one, 1) // a view of l: retire only reads it
}

// scratchRefs returns the converter's reusable ref buffer, emptied: the
// converters build their ref lists there, and Put copies them into the
// produced map (rows' return value lives until the next Put only).
func (c *Converter) scratchRefs() []rowRef { return c.scratch[:0] }

// oneRef returns a list holding only r, in the scratch buffer.
func (c *Converter) oneRef(r rowRef) []rowRef {
	c.scratch = append(c.scratch[:0], r)
	return c.scratch
}
