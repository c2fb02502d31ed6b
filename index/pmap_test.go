package index

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// collideKey hashes to few distinct values whose home slots are the last
// of a table: long probe runs that wrap around, to exercise backward-shift
// deletion.
type collideKey uint32

func (k collideKey) shard() uint64 { return uint64(k%4)<<62 | (1<<32 - 1 - uint64(k%5)<<28) }

// TestPmapAgainstMap applies random transactions of sets and deletes (and
// reserves) to a pmap and a Go map, and checks after each commit that every
// version so far still reads as the map did when it was committed.
func TestPmapAgainstMap(t *testing.T) {
	t.Run("mixed", func(t *testing.T) { testPmapAgainstMap[indexKey](t, func(i int) indexKey { return indexKey(i) }) })
	t.Run("colliding", func(t *testing.T) { testPmapAgainstMap[collideKey](t, func(i int) collideKey { return collideKey(i) }) })
}

func testPmapAgainstMap[K keyer](t *testing.T, key func(int) K) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		var versions []pmap[K, int]
		var models []map[K]int
		var m pmap[K, int]
		model := map[K]int{}
		// Key spaces of a few to a few thousand keys: one shard, several,
		// re-sharding up and down.
		keys := 1 + rng.IntN([]int{8, 60, 3000}[seed%3])
		for step := range 40 {
			x := m.txn()
			if rng.IntN(8) == 0 {
				x.reserve(rng.IntN(2 * keys))
			}
			for range rng.IntN(keys) + 1 {
				k := key(rng.IntN(keys))
				if rng.IntN(3) == 0 {
					x.Delete(k)
					delete(model, k)
					continue
				}
				v := rng.Int()
				_, had := model[k]
				if isNew := x.Set(k, v); isNew == had {
					t.Fatalf("seed %d step %d: Set(%v) reported new=%v, key present before: %v", seed, step, k, isNew, had)
				}
				model[k] = v
				if got, ok := x.Get(k); !ok || got != v {
					t.Fatalf("seed %d step %d: Get(%v) in the transaction = %d, %v; want %d", seed, step, k, got, ok, v)
				}
			}
			m = x.commit()
			versions = append(versions, m)
			models = append(models, maps.Clone(model))
			for i := range versions {
				if err := pmapEquals(versions[i], models[i], key, keys); err != nil {
					t.Fatalf("seed %d step %d: version %d: %v", seed, step, i, err)
				}
			}
		}
	}
}

func pmapEquals[K keyer](m pmap[K, int], want map[K]int, key func(int) K, keys int) error {
	if m.Len() != len(want) {
		return fmt.Errorf("Len = %d, want %d", m.Len(), len(want))
	}
	for i := range keys {
		k := key(i)
		got, ok := m.Get(k)
		w, wok := want[k]
		if ok != wok || got != w {
			return fmt.Errorf("Get(%v) = %d, %v; want %d, %v", k, got, ok, w, wok)
		}
	}
	n := 0
	m.All(func(k K, v int) bool {
		n++
		if want[k] != v {
			n = -1 << 30
		}
		return true
	})
	if n != len(want) {
		return fmt.Errorf("All saw %d matching entries, want %d", n, len(want))
	}
	return nil
}

func TestPtableDeleteInRun(t *testing.T) {
	// Keys of one home slot and its neighbours, deleted in every order.
	for _, order := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}} {
		var x pmapTxn[collideKey, int]
		for i := range 5 {
			x.Set(collideKey(i*5), i) // same hash: one run
		}
		left := map[collideKey]int{0: 0, 5: 1, 10: 2, 15: 3, 20: 4}
		for _, i := range order {
			x.Delete(collideKey(i * 5))
			delete(left, collideKey(i*5))
			for k, v := range left {
				if got, ok := x.Get(k); !ok || got != v {
					t.Fatalf("order %v: after deleting %d, Get(%d) = %d, %v", order, i*5, k, got, ok)
				}
			}
		}
	}
}
