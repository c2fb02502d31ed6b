package serve

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// TestSortNamesShared: streams sending the same list get one shared sorted
// copy; "*" and duplicates are dropped; a different list with the same
// digest is never given another's result.
func TestSortNamesShared(t *testing.T) {
	list := func() []string {
		var l []string
		for i := 20; i > 0; i-- {
			l = append(l, fmt.Sprintf("outbound|80||svc-%02d", i))
		}
		return append(l, "*", "outbound|80||svc-01")
	}
	a, starA, ea := sortNames(list(), namesDigest(list()))
	b, starB, eb := sortNames(list(), namesDigest(list()))
	if !starA || !starB || len(a) != 20 || !slices.IsSorted(a) {
		t.Fatalf("sorted %v (star %v)", a, starA)
	}
	if unsafe.SliceData(a) != unsafe.SliceData(b) {
		t.Fatal("two streams sending the same names got separate sorted lists")
	}
	other := list()
	other[0] = "outbound|80||other"
	c, _, _ := sortNames(other, namesDigest(list())) // a colliding digest
	if !slices.Contains(c, "outbound|80||other") {
		t.Fatalf("a colliding list got another's result: %v", c)
	}
	runtime.KeepAlive(ea) // the streams hold their entries
	runtime.KeepAlive(eb)
}

// TestAddedResourcesShared: the resources a subscription change adds are
// found once per (before, after, generated set) and shared.
func TestAddedResourcesShared(t *testing.T) {
	var res []engine.Resource
	var names []string
	for i := range 12 {
		n := fmt.Sprintf("c%02d", i)
		res = append(res, engine.Resource{Name: n, Version: "1"})
		names = append(names, n)
	}
	before := sharedNames(slices.Clone(names[:10]))
	after := sharedNames(slices.Clone(names))
	d := setDigest(res)
	a := addedResources(before, after, res, d)
	b := addedResources(before, after, res, d)
	if len(a.res) != 2 || a.res[0].Name != "c10" || a.res[1].Name != "c11" {
		t.Fatalf("added %v", a.res)
	}
	if a != b {
		t.Fatal("the same change computed twice")
	}
	if got := addedResources(after, after, res, d); len(got.res) != 0 {
		t.Fatalf("nothing added, got %v", got.res)
	}
}
