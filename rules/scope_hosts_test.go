package rules

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestScopeHostsOrder: the integer-keyed sort orders hostnames exactly as
// comparing the strings does, whatever prefixes they share (none, past the
// 8 bytes of one key, the whole of a shorter name), with repeated hosts,
// NUL bytes (which tie with the keys' zero padding) and enough candidates
// to take many position bits.
func TestScopeHostsOrder(t *testing.T) {
	long := strings.Repeat("x", 200)
	rng := rand.New(rand.NewPCG(1, 2))
	randomNames := func(n int, alphabet string, maxLen int) []string {
		out := make([]string, n)
		for i := range out {
			b := make([]byte, 1+rng.IntN(maxLen))
			for j := range b {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			}
			out[i] = string(b)
		}
		return out
	}
	httpNames := func(n int) []string {
		out := []string{"example.com"}
		for i := range n {
			out = append(out, fmt.Sprintf("random-%d.host.example", i))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		hosts []string
	}{
		{"empty", nil},
		{"one", []string{"a.b"}},
		{"same host", []string{"a.b", "a.b", "a.b"}},
		{"prefixes", []string{"abc", "a", "ab", "abcdefghijklmnop", "abcdefghi", "abcdefgh", ""}},
		{"long shared prefix", []string{long + "b", long + "a", long, long + "a", long + "ab"}},
		{"nul bytes", []string{"a", "a\x00", "a\x00\x00\x00\x00\x00\x00\x00\x00b", "a\x00\x00\x00\x00\x00\x00\x00\x00", "a\x01", "a"}},
		{"high bytes", []string{"\xff\xff", "\xff", "é.example", "e.example", "\x80"}},
		{"http 100", httpNames(100)},
		{"http 1000", httpNames(1000)},
		{"namespaces", []string{"reviews.default.svc.cluster.local", "ratings.default.svc.cluster.local",
			"reviews.prod.svc.cluster.local", "productpage.default.svc.cluster.local", "productcatalog.default.svc.cluster.local"}},
		{"random short", randomNames(300, "ab.", 6)},
		{"random long", randomNames(5000, "ab", 40)},
		{"random shared prefix", func() []string {
			out := randomNames(700, "a-z.", 12)
			for i := range out {
				out[i] = "service-" + out[i] + ".ns.svc.cluster.local"
			}
			return out
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) { checkScopeHostsOrder(t, tc.hosts) })
	}
}

// FuzzScopeHostsOrder: any hostnames (newline-separated), NUL bytes and
// repeats included, come out in the strings' order.
func FuzzScopeHostsOrder(f *testing.F) {
	f.Add("b\na\nab\na")
	f.Add("a\na\x00\na\x00\x00\x00\x00\x00\x00\x00\x00b\nrandom-1.host\nrandom-10.host")
	f.Fuzz(func(t *testing.T, s string) {
		checkScopeHostsOrder(t, strings.Split(s, "\n"))
	})
}

func checkScopeHostsOrder(t *testing.T, hosts []string) {
	t.Helper()
	snap := &index.Snapshot{Symbols: index.NewSymbols()}
	o := &scopeHosts{}
	for i, h := range hosts {
		o.hs = append(o.hs, scopeHost{host: snap.Symbols.Intern(h), id: index.ServiceID(i)})
	}
	o.sort(snap)
	got := make([]string, len(o.keys))
	ids := make([]index.ServiceID, len(o.keys))
	for i := range o.keys {
		got[i], ids[i] = snap.String(o.at(i).host), o.at(i).id
	}
	if want := slices.Sorted(slices.Values(hosts)); !slices.Equal(got, want) {
		t.Fatalf("order differs from the strings' order:\n got %q\nwant %q", got, want)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != index.ServiceID(i) {
			t.Fatalf("candidates lost or repeated: %v", ids)
		}
	}
}

// TestNewScopeMatchesNaive: NewScope keeps, per host, the service of the
// proxy's namespace, else the oldest, and lists them by hostname, as the
// naive scope (a map filled candidate by candidate, sorted by
// sortServicesByHost) does, over hosts defined in several namespaces and
// services exported to some namespaces only.
func TestNewScopeMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f := newXDSFixture(t)
	namespaces := []string{"a", "b", "c", "istio-system"}
	for i := range 400 {
		host := fmt.Sprintf("svc-%d.example", rng.IntN(150))
		if i%3 == 0 {
			host = fmt.Sprintf("svc-%d.%s.svc.cluster.local", rng.IntN(50), namespaces[rng.IntN(3)])
		}
		s := index.Service{
			Key:    index.ServiceKey{Host: f.sym(host), Namespace: f.sym(namespaces[rng.IntN(len(namespaces))])},
			Name:   f.sym(fmt.Sprint("s", i)),
			Origin: index.OriginServiceEntry,
			Ports:  []index.Port{f.port("http", 80, index.ProtocolHTTP)},
		}
		switch rng.IntN(5) {
		case 0:
			s.ExportTo = index.ExportTo{Private: true}
		case 1:
			s.ExportTo = index.ExportTo{Namespaces: []index.Sym{f.sym("b")}}
		case 2:
			s.ExportTo = index.ExportTo{Private: true, None: true}
		}
		f.b.PutService(s)
	}
	snap := f.apply()
	for _, ns := range append(namespaces, "elsewhere") {
		t.Run(ns, func(t *testing.T) {
			sc := NewScope(snap, &encode.ProxyClass{Type: encode.ProxySidecar, Namespace: ns})
			services, byHost := naiveScope(snap, ns)
			if len(services) == 0 {
				t.Fatal("the fixture shows the scope nothing")
			}
			if !slices.Equal(sc.Services, services) {
				t.Errorf("Services = %v, want %v", sc.Services, services)
			}
			if !maps.Equal(sc.ByHost, byHost) {
				t.Errorf("ByHost = %v, want %v", sc.ByHost, byHost)
			}
		})
	}
}

// naiveScope is NewScope's services without a Sidecar, as it was computed
// before scopeHosts.
func naiveScope(snap *index.Snapshot, namespace string) ([]index.ServiceID, map[index.Sym]index.ServiceID) {
	ns, _ := snap.Symbols.Lookup(namespace)
	byHost := map[index.Sym]index.ServiceID{}
	snap.Services(func(id index.ServiceID, svc *index.Service) bool {
		if !svc.ExportTo.VisibleTo(svc.Key.Namespace, ns) {
			return true
		}
		cur, ok := byHost[svc.Key.Host]
		mine, curMine := svc.Key.Namespace == ns, ok && snap.ServiceByID(cur).Key.Namespace == ns
		if !ok || (mine && !curMine) || (mine == curMine && id < cur) {
			byHost[svc.Key.Host] = id
		}
		return true
	})
	services := slices.Collect(maps.Values(byHost))
	sortServicesByHost(snap, services)
	return services, byHost
}

// TestNewScopeAllocs gates the allocations of a scope on istio-bench's
// http workload (BenchmarkSidecarScope measures its time): the Scope, its
// Services and what a map of its size takes (ByHost), nothing per
// candidate; the scratch lists are reused.
func TestNewScopeAllocs(t *testing.T) {
	for _, n := range []int{100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			snap := httpSnapshot(t, n)
			class := &encode.ProxyClass{Type: encode.ProxySidecar, Namespace: "default"}
			var sc *Scope
			allocs := testing.AllocsPerRun(20, func() { sc = NewScope(snap, class) })
			if len(sc.Services) != n+1 {
				t.Fatalf("scope sees %d services, want %d", len(sc.Services), n+1)
			}
			byHost := testing.AllocsPerRun(20, func() {
				m := make(map[index.Sym]index.ServiceID, len(sc.Services))
				for h, id := range sc.ByHost {
					m[h] = id
				}
				byHostSink = m // on the heap, as ByHost is
			})
			if budget := byHost + 2; allocs > budget {
				t.Errorf("NewScope: %.0f allocations, budget %.0f (%.0f for the map)", allocs, budget, byHost)
			} else {
				t.Logf("NewScope: %.0f allocations (%.0f for the map)", allocs, byHost)
			}
		})
	}
}

var byHostSink map[index.Sym]index.ServiceID
