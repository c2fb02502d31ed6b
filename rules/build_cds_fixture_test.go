package rules

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// xdsFixture builds index rows directly through index.Writer and
// index.Batch for the CDS/EDS tests.
type xdsFixture struct {
	t testing.TB
	w *index.Writer
	b index.Batch
	// created is the creation time config gives the rows it puts.
	created int64
}

func newXDSFixture(t testing.TB) *xdsFixture { return &xdsFixture{t: t, w: index.NewWriter()} }

func (f *xdsFixture) sym(s string) index.Sym { return f.w.Symbols().Intern(s) }

func (f *xdsFixture) labels(kv ...string) index.LabelSetID {
	var ls []index.Label
	for i := 0; i+1 < len(kv); i += 2 {
		ls = append(ls, index.Label{Key: f.sym(kv[i]), Value: f.sym(kv[i+1])})
	}
	return f.w.Labels().Intern(ls)
}

func (f *xdsFixture) port(name string, n uint32, p index.Protocol) index.Port {
	return index.Port{Name: f.sym(name), Number: n, Protocol: p}
}

// serviceEntry puts one host of a STATIC ServiceEntry with inline endpoints
// (labelled tlsMode=istio when istio is set), as ingest converts it.
func (f *xdsFixture) serviceEntry(name, ns, host, vip string, internal, istio bool, ports []index.Port, addrs ...string) index.ServiceKey {
	s := index.Service{
		Key:          index.ServiceKey{Host: f.sym(host), Namespace: f.sym(ns)},
		Name:         f.sym(name),
		Origin:       index.OriginServiceEntry,
		MeshExternal: !internal,
		Ports:        ports,
	}
	if vip != "" {
		s.Addresses = []netip.Prefix{netip.MustParsePrefix(vip + "/32")}
	}
	f.b.PutService(s)
	if len(addrs) > 0 {
		var eps []index.Endpoint
		for _, a := range addrs {
			e := index.Endpoint{Addr: netip.MustParseAddr(a)}
			if istio {
				e.Labels = f.labels("security.istio.io/tlsMode", "istio")
				e.TLSMode = index.TLSModeIstio
			}
			eps = append(eps, e)
		}
		f.b.PutEndpoints(s.Key, index.EndpointGroup{Source: f.sym(name), Endpoints: eps})
	}
	return s.Key
}

// kubernetesService is the apiserver's "kubernetes" Service, with no
// EndpointSlice (as in the istiod reference run).
func (f *xdsFixture) kubernetesService() index.ServiceKey {
	s := index.Service{
		Key:       index.ServiceKey{Host: f.sym("kubernetes.default.svc.cluster.local"), Namespace: f.sym("default")},
		Name:      f.sym("kubernetes"),
		Origin:    index.OriginKubernetes,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
		Ports:     []index.Port{{Name: f.sym("https"), Number: 443, TargetPort: 6443, Protocol: index.ProtocolHTTPS}},
	}
	f.b.PutService(s)
	return s.Key
}

// httpWorkload mirrors istio-bench's http.yaml rendered with Services=n in
// namespace default, plus the kubernetes Service.
func (f *xdsFixture) httpWorkload(n int) {
	f.kubernetesService()
	http := []index.Port{f.port("http", 80, index.ProtocolHTTP)}
	f.serviceEntry("proxy-service-instance", "default", "example.com", "", true, true, http, "1.1.1.1")
	for i := 0; i < n; i++ {
		f.serviceEntry(fmt.Sprintf("service-%d", i), "default", fmt.Sprintf("random-%d.host.example", i),
			fmt.Sprintf("240.240.%d.%d", i/255, i%255), true, true, http, fmt.Sprintf("240.241.%d.%d", i/255, i%255))
	}
}

func (f *xdsFixture) config(kind index.ConfigKind, ns, name string, spec proto.Message, selector index.LabelSetID, exportTo index.ExportTo, hosts ...string) index.ConfigKey {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		f.t.Fatal(err)
	}
	c := index.Config{Kind: kind, Key: index.ConfigKey{Namespace: f.sym(ns), Name: f.sym(name)}, Spec: spec,
		Hash: xxhash.Sum64String(ns+"/"+name+"/"+kind.String()+"/") ^ xxhash.Sum64(b), ExportTo: exportTo}
	if selector != 0 {
		c.HasSelector, c.Selector = true, selector
	}
	for _, h := range hosts {
		c.Hosts = append(c.Hosts, f.sym(h))
	}
	if dr, ok := spec.(*networking.DestinationRule); ok {
		// As ingest interns them: the engine only reads.
		for _, ss := range dr.Subsets {
			var kv []string
			for k, v := range ss.Labels {
				kv = append(kv, k, v)
			}
			c.SubsetLabels = append(c.SubsetLabels, f.labels(kv...))
		}
	}
	c.CreationTime = f.created
	f.b.PutConfig(c)
	return c.Key
}

func (f *xdsFixture) apply() *index.Snapshot {
	f.w.Apply(&f.b)
	f.b = index.Batch{}
	return f.w.Snapshot()
}

// sidecarScope is the scope of a sidecar in ns with the proxy's IP, its
// instances computed as the engine does.
func sidecarScope(snap *index.Snapshot, ns, ip string) *Scope {
	class := &encode.ProxyClass{Type: encode.ProxySidecar, Namespace: ns, IstioVersion: "1.31", ClusterID: "Kubernetes"}
	sc := NewScope(snap, class)
	sc.Instances = ComputeInstances(snap, &Node{ID: "pod-0." + ns, Type: encode.ProxySidecar, IPs: []netip.Addr{netip.MustParseAddr(ip)}, Namespace: ns})
	return sc
}

func classScope(snap *index.Snapshot, class *encode.ProxyClass) *Scope { return NewScope(snap, class) }

func resourceNames(rs []Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

func verifyingCache() *encode.Cache {
	c := encode.NewCache()
	c.SetVerify(true)
	return c
}

// decodeResources unpacks each resource's Any into a fresh M and runs
// go-control-plane's ValidateAll on it and on every Any nested in it.
func decodeResources[M proto.Message](t testing.TB, rs []Resource, newM func() M) []M {
	t.Helper()
	out := make([]M, 0, len(rs))
	for _, r := range rs {
		out = append(out, xdstest.Decode(t, r.Name, r.Any, newM))
	}
	return out
}
