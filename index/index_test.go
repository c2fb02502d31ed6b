package index

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// model is the naive reference the index is checked against: plain maps.
type model struct {
	services  map[ServiceKey]Service
	workloads map[WorkloadKey]Workload
	configs   map[ConfigKey]Config
	groups    map[ServiceKey]map[Sym]EndpointGroup
}

func newModel() *model {
	return &model{
		services:  map[ServiceKey]Service{},
		workloads: map[WorkloadKey]Workload{},
		configs:   map[ConfigKey]Config{},
		groups:    map[ServiceKey]map[Sym]EndpointGroup{},
	}
}

func TestIndexAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*7))
			w := NewWriter()
			m := newModel()
			syms := w.Symbols()
			hosts := make([]Sym, 30)
			for i := range hosts {
				hosts[i] = syms.Intern(fmt.Sprintf("svc-%d.example", i))
			}
			nss := []Sym{syms.Intern("a"), syms.Intern("b"), syms.Intern("c")}
			srcs := []Sym{syms.Intern("slice-1"), syms.Intern("slice-2")}
			var snaps []*Snapshot
			var models []*model
			for step := 0; step < 60; step++ {
				var b Batch
				for op := 0; op < 1+rng.IntN(40); op++ {
					host, ns := hosts[rng.IntN(len(hosts))], nss[rng.IntN(len(nss))]
					key := ServiceKey{Host: host, Namespace: ns}
					switch rng.IntN(7) {
					case 0, 1:
						s := Service{Key: key, Origin: OriginKubernetes, Ports: []Port{{Number: uint32(80 + rng.IntN(3)), Protocol: ProtocolHTTP}}}
						b.PutService(s)
						m.services[key] = s
					case 2:
						b.DeleteService(key)
						delete(m.services, key)
					case 3, 4:
						src := srcs[rng.IntN(len(srcs))]
						g := EndpointGroup{Source: src, Ports: []EndpointPort{{Port: 8080}}}
						for e := 0; e < rng.IntN(4); e++ {
							g.Endpoints = append(g.Endpoints, Endpoint{Addr: netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(5)), byte(e)})})
						}
						b.PutEndpoints(key, g)
						if m.groups[key] == nil {
							m.groups[key] = map[Sym]EndpointGroup{}
						}
						m.groups[key][src] = g
					case 5:
						src := srcs[rng.IntN(len(srcs))]
						b.DeleteEndpoints(key, src)
						delete(m.groups[key], src)
						if len(m.groups[key]) == 0 {
							delete(m.groups, key)
						}
					case 6:
						ck := ConfigKey{Namespace: ns, Name: host}
						if rng.IntN(3) == 0 {
							b.DeleteConfig(ConfigVirtualService, ck)
							delete(m.configs, ck)
						} else {
							c := Config{Kind: ConfigVirtualService, Key: ck, Hosts: []Sym{hosts[rng.IntN(len(hosts))]}, Hash: rng.Uint64()}
							if rng.IntN(2) == 0 {
								c.SourceLabelKeys = []Sym{nss[rng.IntN(len(nss))]}
							}
							b.PutConfig(c)
							m.configs[ck] = c
						}
					}
				}
				prev := w.Snapshot()
				cs := w.Apply(&b)
				snap := w.Snapshot()
				checkSnapshot(t, snap, m)
				checkChangeSet(t, prev, snap, cs)
				snaps = append(snaps, snap)
				models = append(models, m.clone())
			}
			// Old snapshots are untouched by later batches.
			for i, s := range snaps {
				checkSnapshot(t, s, models[i])
			}
		})
	}
}

func (m *model) clone() *model {
	c := newModel()
	for k, v := range m.services {
		c.services[k] = v
	}
	for k, v := range m.configs {
		c.configs[k] = v
	}
	for k, v := range m.groups {
		c.groups[k] = map[Sym]EndpointGroup{}
		for s, g := range v {
			c.groups[k][s] = g
		}
	}
	return c
}

func checkSnapshot(t *testing.T, s *Snapshot, m *model) {
	t.Helper()
	if s.NumServices() != len(m.services) {
		t.Fatalf("v%d: %d services, model has %d", s.Version, s.NumServices(), len(m.services))
	}
	byHost := map[Sym][]ServiceKey{}
	byNS := map[Sym][]ServiceKey{}
	for k, want := range m.services {
		got, id, ok := s.Service(k)
		if !ok {
			t.Fatalf("v%d: service %v missing", s.Version, k)
		}
		if got.Key != want.Key || !slices.Equal(got.Ports, want.Ports) || got.Hash == 0 {
			t.Fatalf("v%d: service %v = %+v, want %+v", s.Version, k, got, want)
		}
		if s.ServiceByID(id) != got {
			t.Fatalf("v%d: ServiceByID(%d) disagrees with Service(%v)", s.Version, id, k)
		}
		byHost[k.Host] = append(byHost[k.Host], k)
		byNS[k.Namespace] = append(byNS[k.Namespace], k)
	}
	n := 0
	s.Services(func(id ServiceID, r *Service) bool { n++; return true })
	if n != len(m.services) {
		t.Fatalf("v%d: iteration saw %d services, want %d", s.Version, n, len(m.services))
	}
	checkIndex := func(name string, ids []ServiceID, want []ServiceKey) {
		t.Helper()
		var got []ServiceKey
		for _, id := range ids {
			got = append(got, s.ServiceByID(id).Key)
		}
		if !slices.IsSorted(ids) {
			t.Fatalf("v%d: %s not sorted: %v", s.Version, name, ids)
		}
		slices.SortFunc(got, ServiceKey.compare)
		slices.SortFunc(want, ServiceKey.compare)
		if !slices.Equal(got, want) {
			t.Fatalf("v%d: %s = %v, want %v", s.Version, name, got, want)
		}
	}
	for i := Sym(0); int(i) < s.Symbols.Len(); i++ {
		checkIndex("ServicesByHost", s.ServicesByHost(i), byHost[i])
		checkIndex("ServicesInNamespace", s.ServicesInNamespace(i), byNS[i])
	}
	if s.NumEndpointShards() != len(m.groups) {
		t.Fatalf("v%d: %d shards, model has %d", s.Version, s.NumEndpointShards(), len(m.groups))
	}
	for k, groups := range m.groups {
		sh := s.Endpoints(k)
		if sh == nil || len(sh.Groups) != len(groups) {
			t.Fatalf("v%d: shard %v = %+v, want %d groups", s.Version, k, sh, len(groups))
		}
		for _, g := range sh.Groups {
			want := groups[g.Source]
			if !slices.Equal(g.Endpoints, want.Endpoints) {
				t.Fatalf("v%d: shard %v group %v = %v, want %v", s.Version, k, g.Source, g.Endpoints, want.Endpoints)
			}
		}
	}
	if s.NumConfigs(ConfigVirtualService) != len(m.configs) {
		t.Fatalf("v%d: %d configs, want %d", s.Version, s.NumConfigs(ConfigVirtualService), len(m.configs))
	}
	for k, want := range m.configs {
		got, ok := s.Config(ConfigVirtualService, k)
		if !ok || got.Hash != want.Hash {
			t.Fatalf("v%d: config %v = %+v, want %+v", s.Version, k, got, want)
		}
		found := false
		s.ConfigsByHost(ConfigVirtualService, want.Hosts[0], func(c *Config) bool {
			found = found || c.Key == k
			return true
		})
		if !found {
			t.Fatalf("v%d: config %v not found by host", s.Version, k)
		}
	}
	withLabels := 0
	s.ConfigsWithSourceLabels(ConfigVirtualService, func(c *Config) bool {
		if want, ok := m.configs[c.Key]; !ok || len(want.SourceLabelKeys) == 0 || want.Hash != c.Hash {
			t.Fatalf("v%d: ConfigsWithSourceLabels has %v, model %+v", s.Version, c.Key, want)
		}
		withLabels++
		return true
	})
	for _, c := range m.configs {
		if len(c.SourceLabelKeys) > 0 {
			withLabels--
		}
	}
	if withLabels != 0 {
		t.Fatalf("v%d: ConfigsWithSourceLabels misses %d configs", s.Version, -withLabels)
	}
}

// checkChangeSet compares the change set with a diff of the two snapshots.
func checkChangeSet(t *testing.T, prev, next *Snapshot, cs *ChangeSet) {
	t.Helper()
	var want []ServiceKey
	seen := map[ServiceKey]bool{}
	prev.Services(func(_ ServiceID, r *Service) bool {
		seen[r.Key] = true
		if n, _, ok := next.Service(r.Key); !ok || n.Hash != r.Hash {
			want = append(want, r.Key)
		}
		return true
	})
	next.Services(func(_ ServiceID, r *Service) bool {
		if !seen[r.Key] {
			want = append(want, r.Key)
		}
		return true
	})
	slices.SortFunc(want, ServiceKey.compare)
	if !slices.Equal(cs.Services, want) && !(len(cs.Services) == 0 && len(want) == 0) {
		t.Fatalf("change set services = %v, want %v", cs.Services, want)
	}
	var wantEP []ServiceKey
	prev.EndpointShards(func(sh *EndpointShard) bool {
		if n := next.Endpoints(sh.Service); n == nil || n.Hash != sh.Hash {
			wantEP = append(wantEP, sh.Service)
		}
		return true
	})
	next.EndpointShards(func(sh *EndpointShard) bool {
		if prev.Endpoints(sh.Service) == nil {
			wantEP = append(wantEP, sh.Service)
		}
		return true
	})
	slices.SortFunc(wantEP, ServiceKey.compare)
	if !slices.Equal(cs.Endpoints, wantEP) && !(len(cs.Endpoints) == 0 && len(wantEP) == 0) {
		t.Fatalf("change set endpoints = %v, want %v", cs.Endpoints, wantEP)
	}
	if cs.Empty() != (next == prev) {
		t.Fatalf("change set empty=%v but snapshot replaced=%v", cs.Empty(), next != prev)
	}
}
