package index

import (
	"cmp"
	"slices"
)

// ordered keys sort deterministically for change sets and debug output.
type ordered[T any] interface {
	compare(T) int
}

func (a Sym) compare(b Sym) int { return cmp.Compare(a, b) }

func (a ServiceKey) compare(b ServiceKey) int {
	if c := cmp.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	return cmp.Compare(a.Namespace, b.Namespace)
}

func (a WorkloadKey) compare(b WorkloadKey) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

func (a ConfigKey) compare(b ConfigKey) int {
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// dedupSorted sorts keys in place and removes repeats.
func dedupSorted[T interface {
	comparable
	ordered[T]
}](keys []T) []T {
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b T) int { return a.compare(b) })
	return slices.Compact(keys)
}
