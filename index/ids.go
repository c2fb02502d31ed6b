package index

import "unsafe"

// idList is a secondary index's list of row IDs, stored as pointer and
// length: a list is never appended to, and this takes 12 bytes of an index
// slot where a slice takes 24.
type idList struct {
	p *uint32
	n uint32
}

func newIDList(ids []uint32) idList { return idList{p: unsafe.SliceData(ids), n: uint32(len(ids))} }

// ids returns the list, shared: never modify it.
func (l idList) ids() []uint32 {
	if l.n == 0 {
		return nil
	}
	return unsafe.Slice(l.p, l.n)
}

// asServiceIDs views a table's ID list as ServiceIDs without copying.
func asServiceIDs(ids []uint32) []ServiceID {
	if len(ids) == 0 {
		return nil
	}
	return unsafe.Slice((*ServiceID)(unsafe.Pointer(&ids[0])), len(ids))
}
