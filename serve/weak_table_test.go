package serve

import (
	"runtime"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

type weakVal struct{ b []byte }

// settle runs GC until the table's cleanups have deleted the entries of
// collected values (they run after a GC, on their own goroutine).
func settle(cond func() bool) bool {
	for range 50 {
		runtime.GC()
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// TestWeakTable: a value is shared while something holds it, computed once
// per key, and its entry goes once nothing does; a full table is dropped.
func TestWeakTable(t *testing.T) {
	tab := newWeakTable[int, weakVal](4)
	computed := 0
	compute := func() (*weakVal, int) { computed++; return &weakVal{b: make([]byte, 1<<20)}, 0 }

	v1, _, loaded := tab.get(1, compute)
	v2, _, loaded2 := tab.get(1, compute)
	if v1 != v2 || loaded || !loaded2 || computed != 1 {
		t.Fatalf("held value not shared: same=%v loaded=%v,%v computed=%d", v1 == v2, loaded, loaded2, computed)
	}
	runtime.KeepAlive(v1)
	v1, v2 = nil, nil
	if !settle(func() bool { return tab.size() == 0 }) {
		t.Fatalf("the entry of a collected value is still there (%d entries)", tab.size())
	}

	var held []*weakVal
	for k := range 10 {
		v, _, _ := tab.get(k, compute)
		held = append(held, v)
		if tab.size() > 4 {
			t.Fatalf("%d entries, max 4", tab.size())
		}
	}
	if n, _ := tab.live(func(*weakVal, int) int { return 0 }); n == 0 || n > 4 {
		t.Fatalf("%d live entries after a full table was dropped", n)
	}
	runtime.KeepAlive(held)
}

// TestSharedBodyReleased: a body no stream holds any more is collected and
// its entry deleted: superseded versions do not stay.
func TestSharedBodyReleased(t *testing.T) {
	s := NewXDSServer(nil, XDSOptions{})
	res := []engine.Resource{{Name: "a", Any: make([]byte, 1<<20)}}
	held := map[uint64][]byte{}
	for v := range uint64(20) {
		h := wireHeader{version: v, typeURL: engine.TypeCluster}
		held[v] = s.sharedBodyOf(&h, v, res) // each version superseded by the next
		if v > 0 {
			delete(held, v-1)
		}
	}
	if !settle(func() bool { return s.bodies.size() == 1 }) {
		t.Fatalf("%d bodies in the table, 1 held", s.bodies.size())
	}
	if _, bytes := s.bodies.live(func(_ *byte, n int) int { return n }); bytes < 1<<20 || bytes > 2<<20 {
		t.Fatalf("%d live bytes, one 1 MiB body held", bytes)
	}
	runtime.KeepAlive(held)
}
