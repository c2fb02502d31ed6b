package serve

import (
	"slices"
	"unsafe"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// After a config change every sidecar of a class sends the same new EDS
// subscription (a thousand names, one more than before) and is owed the
// same added assignments. Sorting that list and finding what it adds cost
// each stream ~0.2 ms — a quarter of a SotW push's server CPU at 1,000
// services — so both are computed once and shared, like response bodies.

// sortedKey identifies a request's resource_names as sent.
type sortedKey struct {
	raw uint64 // namesDigest
	n   int
}

// sortedNames is a request's names sorted, unique and without "*". A
// stream holds the entry of its current subscription (sotwType.sorted):
// the table is weak (weak_table.go).
type sortedNames struct {
	raw    []string // as sent (verification), detached from the request
	sorted []string // shared (sharedNames)
	star   bool     // "*" was among them
}

var sortedLists = newWeakTable[sortedKey, sortedNames](maxSharedLists)

// sortNames returns names (the request's own slice, which it may reorder)
// sorted, compacted and without "*", and whether "*" was there. Lists of
// sharedNamesMin names or more are looked up by their digest raw; e is then
// their shared entry, which the caller keeps while it uses sorted.
func sortNames(names []string, raw uint64) (sorted []string, star bool, e *sortedNames) {
	if len(names) < sharedNamesMin {
		sorted, star = sortNamesNow(names)
		return sorted, star, nil
	}
	k := sortedKey{raw: raw, n: len(names)}
	e, _, loaded := sortedLists.get(k, func() (*sortedNames, int) {
		return newSortedNames(names), 0
	})
	if loaded && !slices.Equal(e.raw, names) {
		e = newSortedNames(names) // a digest collision: not shared
	}
	return e.sorted, e.star, e
}

// newSortedNames sorts a copy of names detached from their request; the
// sorted list shares its strings.
func newSortedNames(names []string) *sortedNames {
	e := &sortedNames{raw: detachNames(names)}
	e.sorted, e.star = sortNamesNow(slices.Clone(e.raw))
	e.sorted = sharedNames(e.sorted)
	return e
}

func sortNamesNow(names []string) ([]string, bool) {
	star := false
	names = slices.DeleteFunc(names, func(n string) bool {
		if n == "*" {
			star = true
			return true
		}
		return false
	})
	slices.Sort(names)
	return slices.Compact(names), star
}

// addedKey identifies the assignments a subscription change adds: the
// shared lists before and after, and the generated set.
type addedKey struct {
	before, after *string // unsafe.SliceData of shared lists
	nb, na        int
	res           uint64 // setDigest
	nres          int
}

// addedSet is the resources a subscription change adds. A stream holds the
// last one it sent (sotwType.added): the table is weak.
type addedSet struct {
	res []engine.Resource
}

var addedSets = newWeakTable[addedKey, addedSet](maxSharedLists)

// addedResources returns the resources of res whose names are not in
// before (sorted), in a set the caller keeps while it uses them. The
// result is shared: never modify it.
func addedResources(before, after []string, res []engine.Resource, digest uint64) *addedSet {
	if len(before) < sharedNamesMin || len(after) < sharedNamesMin {
		return &addedSet{res: addedNow(before, res)} // not shared lists: no identity to key on
	}
	k := addedKey{before: unsafe.SliceData(before), after: unsafe.SliceData(after), nb: len(before), na: len(after), res: digest, nres: len(res)}
	a, _, _ := addedSets.get(k, func() (*addedSet, int) {
		return &addedSet{res: addedNow(before, res)}, 0
	})
	return a
}

func addedNow(before []string, res []engine.Resource) []engine.Resource {
	var added []engine.Resource // a few: res may be shared, never filter it in place
	for _, r := range res {
		if _, had := slices.BinarySearch(before, r.Name); !had {
			added = append(added, r)
		}
	}
	return added
}

// maxSharedLists bounds the entries of both tables.
const maxSharedLists = 16384
