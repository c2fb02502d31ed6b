package index

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

// TestBulkBuildMatchesIncremental applies the same random batches to a
// writer and to one that takes the one-row path for every row (the bulk
// path's reference), and checks that they publish the same snapshots (rows,
// IDs, free lists, primary and secondary indexes, endpoint shards) and the
// same change sets. The first batches build tables from empty, with keys
// put twice, deleted and put again within a batch.
func TestBulkBuildMatchesIncremental(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			bulk := NewWriter()
			ref := NewWriterSharing(bulk)
			ref.incremental = true
			g := newBatchGen(bulk, seed)
			for step := range 6 {
				// The same batch twice (a batch's groups are resolved in
				// place: each writer gets its own).
				state := *g.rng
				b1 := g.batch(step)
				*g.rng = state
				b2 := g.batch(step)
				cs1, cs2 := bulk.Apply(b1), ref.Apply(b2)
				if err := changeSetsEqual(cs1, cs2); err != nil {
					t.Fatalf("step %d: change sets differ: %v", step, err)
				}
				if err := snapshotsEqual(bulk.Snapshot(), ref.Snapshot()); err != nil {
					t.Fatalf("step %d: snapshots differ: %v", step, err)
				}
			}
		})
	}
}

// batchGen makes random batches over small key spaces, so that a batch
// repeats keys, and rows join (pods and slices, selectors and entries).
type batchGen struct {
	rng    *rand.PCG
	r      *rand.Rand
	syms   *Symbols
	labels *LabelSets
	ns     []Sym
	names  []Sym
	label  []LabelSetID
}

func newBatchGen(w *Writer, seed uint64) *batchGen {
	pcg := rand.NewPCG(seed, seed*31)
	g := &batchGen{rng: pcg, r: rand.New(pcg), syms: w.Symbols(), labels: w.Labels()}
	for i := range 3 {
		g.ns = append(g.ns, g.syms.Intern(fmt.Sprint("ns-", i)))
	}
	for i := range 12 {
		g.names = append(g.names, g.syms.Intern(fmt.Sprint("name-", i)))
	}
	app := g.syms.Intern("app")
	for i := range 3 {
		g.label = append(g.label, g.labels.Intern([]Label{{Key: app, Value: g.names[i]}}))
	}
	return g
}

func (g *batchGen) pick(s []Sym) Sym { return s[g.r.IntN(len(s))] }

func (g *batchGen) addr() netip.Addr {
	return netip.AddrFrom4([4]byte{10, 0, byte(g.r.IntN(2)), byte(g.r.IntN(8))})
}

// batch returns a batch of many ops for the first steps (builds from
// empty, then large batches), few after.
func (g *batchGen) batch(step int) *Batch {
	var b Batch
	n := 1 + g.r.IntN(8)
	if step < 2 {
		n = 20 + g.r.IntN(150)
	}
	for range n {
		ns := g.pick(g.ns)
		svc := ServiceKey{Host: g.pick(g.names), Namespace: ns}
		del := g.r.IntN(5) == 0
		switch g.r.IntN(5) {
		case 0:
			if del {
				b.DeleteNamespace(ns)
			} else {
				b.PutNamespace(Namespace{Name: ns, Labels: g.label[g.r.IntN(len(g.label))]})
			}
		case 1:
			k := WorkloadKey{Kind: WorkloadKind(1 + g.r.IntN(2)), Namespace: ns, Name: g.pick(g.names)}
			if del {
				b.DeleteWorkload(k)
			} else {
				b.PutWorkload(Workload{Key: k, Addr: g.addr(), Labels: g.label[g.r.IntN(len(g.label))], ServiceAccount: g.pick(g.names), Ready: g.r.IntN(2) == 0})
			}
		case 2:
			if del {
				b.DeleteService(svc)
			} else {
				b.PutService(Service{
					Key: svc, Origin: Origin(1 + g.r.IntN(2)), Ports: []Port{{Number: uint32(80 + g.r.IntN(2))}},
					HasSelector: g.r.IntN(2) == 0, Selector: g.label[g.r.IntN(len(g.label))],
				})
			}
		case 3:
			kind := ConfigKind(g.r.IntN(3))
			k := ConfigKey{Namespace: ns, Name: g.pick(g.names)}
			if del {
				b.DeleteConfig(kind, k)
			} else {
				c := Config{Kind: kind, Key: k, Hash: uint64(g.r.IntN(4)) + 1, HasSelector: g.r.IntN(2) == 0, Selector: g.label[g.r.IntN(len(g.label))]}
				for range g.r.IntN(3) {
					c.Hosts = append(c.Hosts, g.pick(g.names))
				}
				b.PutConfig(c)
			}
		case 4:
			src := g.names[g.r.IntN(2)]
			if del {
				b.DeleteEndpoints(svc, src)
				continue
			}
			grp := EndpointGroup{Source: src, Pods: g.r.IntN(2) == 0, Ports: []EndpointPort{{Port: 8080}}}
			for range g.r.IntN(3) {
				e := Endpoint{Addr: g.addr()}
				if !grp.Pods && g.r.IntN(2) == 0 {
					e.Workload = g.pick(g.names)
				}
				grp.Endpoints = append(grp.Endpoints, e)
			}
			b.PutEndpoints(svc, grp)
		}
	}
	return &b
}

func changeSetsEqual(a, b *ChangeSet) error {
	switch {
	case a.Version != b.Version:
		return fmt.Errorf("version %d vs %d", a.Version, b.Version)
	case !slices.Equal(a.Namespaces, b.Namespaces):
		return fmt.Errorf("namespaces %v vs %v", a.Namespaces, b.Namespaces)
	case !slices.Equal(a.Workloads, b.Workloads):
		return fmt.Errorf("workloads %v vs %v", a.Workloads, b.Workloads)
	case !slices.Equal(a.Services, b.Services):
		return fmt.Errorf("services %v vs %v", a.Services, b.Services)
	case !slices.Equal(a.Endpoints, b.Endpoints):
		return fmt.Errorf("endpoints %v vs %v", a.Endpoints, b.Endpoints)
	}
	for k := range a.Configs {
		if !slices.Equal(a.Configs[k], b.Configs[k]) {
			return fmt.Errorf("configs of kind %d: %v vs %v", k, a.Configs[k], b.Configs[k])
		}
	}
	return nil
}

func snapshotsEqual(a, b *Snapshot) error {
	if a.Version != b.Version || a.ConfigVersion != b.ConfigVersion {
		return fmt.Errorf("versions %d/%d vs %d/%d", a.Version, a.ConfigVersion, b.Version, b.ConfigVersion)
	}
	if err := tablesEqual(&a.services, &b.services); err != nil {
		return fmt.Errorf("services: %v", err)
	}
	if err := tablesEqual(&a.workloads, &b.workloads); err != nil {
		return fmt.Errorf("workloads: %v", err)
	}
	if err := tablesEqual(&a.namespaces, &b.namespaces); err != nil {
		return fmt.Errorf("namespaces: %v", err)
	}
	for k := range a.configs {
		if err := tablesEqual(&a.configs[k], &b.configs[k]); err != nil {
			return fmt.Errorf("configs of kind %d: %v", k, err)
		}
	}
	return pmapsEqual(a.endpoints, b.endpoints, func(x, y *EndpointShard) bool {
		return x.Service == y.Service && x.Hash == y.Hash && reflect.DeepEqual(x.Groups, y.Groups)
	})
}

func tablesEqual[K keyer, R any](a, b *table[K, R]) error {
	if a.next != b.next || !slices.Equal(a.free, b.free) {
		return fmt.Errorf("next %d free %v vs next %d free %v", a.next, a.free, b.next, b.free)
	}
	for id := range a.next {
		if x, y := a.rows.At(id), b.rows.At(id); !reflect.DeepEqual(x, y) {
			return fmt.Errorf("row %d: %+v vs %+v", id, x, y)
		}
	}
	if err := pmapsEqual(a.pk, b.pk, func(x, y uint32) bool { return x == y }); err != nil {
		return fmt.Errorf("primary key: %v", err)
	}
	if len(a.idx) != len(b.idx) {
		return fmt.Errorf("%d indexes vs %d", len(a.idx), len(b.idx))
	}
	for i := range a.idx {
		if err := pmapsEqual(a.idx[i], b.idx[i], func(x, y idList) bool { return slices.Equal(x.ids(), y.ids()) }); err != nil {
			return fmt.Errorf("index %d: %v", i, err)
		}
	}
	return nil
}

func pmapsEqual[K keyer, V any](a, b pmap[K, V], eq func(x, y V) bool) error {
	if a.Len() != b.Len() {
		return fmt.Errorf("%d entries vs %d", a.Len(), b.Len())
	}
	var err error
	a.All(func(k K, x V) bool {
		if y, ok := b.Get(k); !ok || !eq(x, y) {
			err = fmt.Errorf("key %v: %v vs %v (present %v)", k, x, y, ok)
		}
		return err == nil
	})
	return err
}
