package index

import "unsafe"

// asServiceIDs views a table's ID list as ServiceIDs without copying.
func asServiceIDs(ids []uint32) []ServiceID {
	if len(ids) == 0 {
		return nil
	}
	return unsafe.Slice((*ServiceID)(unsafe.Pointer(&ids[0])), len(ids))
}
