package encode_test

import (
	"net/netip"
	"testing"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// fixture builds index rows directly through index.Writer and index.Batch,
// the way ingest does, without going through ingest.
type fixture struct {
	t    testing.TB
	w    *index.Writer
	b    index.Batch
	snap *index.Snapshot
}

func newFixture(t testing.TB) *fixture {
	return &fixture{t: t, w: index.NewWriter()}
}

// names is the view generators resolve the fixture's symbols with.
func (f *fixture) names() index.Names { return f.w.Names() }

func (f *fixture) sym(s string) index.Sym { return f.w.Symbols().Intern(s) }

// labels interns k1, v1, k2, v2...
func (f *fixture) labels(kv ...string) index.LabelSetID {
	var ls []index.Label
	for i := 0; i+1 < len(kv); i += 2 {
		ls = append(ls, index.Label{Key: f.sym(kv[i]), Value: f.sym(kv[i+1])})
	}
	return f.w.Labels().Intern(ls)
}

func (f *fixture) port(name string, number uint32, p index.Protocol) index.Port {
	return index.Port{Name: f.sym(name), Number: number, Protocol: p}
}

// serviceEntry puts a STATIC, mesh-internal ServiceEntry host (istiod's
// defaults for the istio-bench workloads) and returns its key.
func (f *fixture) serviceEntry(host, ns, name string, ports ...index.Port) index.ServiceKey {
	return f.service(index.Service{
		Key:    index.ServiceKey{Host: f.sym(host), Namespace: f.sym(ns)},
		Name:   f.sym(name),
		Origin: index.OriginServiceEntry,
		Ports:  ports,
	})
}

// kubeService puts a Kubernetes Service.
func (f *fixture) kubeService(name, ns string, ports ...index.Port) index.ServiceKey {
	return f.service(index.Service{
		Key:         index.ServiceKey{Host: f.sym(name + "." + ns + ".svc.cluster.local"), Namespace: f.sym(ns)},
		Name:        f.sym(name),
		Origin:      index.OriginKubernetes,
		Addresses:   []netip.Prefix{netip.MustParsePrefix("10.96.0.10/32")},
		Ports:       ports,
		HasSelector: true,
		Selector:    f.labels("app", name),
	})
}

func (f *fixture) service(s index.Service) index.ServiceKey {
	f.b.PutService(s)
	return s.Key
}

func (f *fixture) endpoints(svc index.ServiceKey, source string, ports []index.EndpointPort, eps ...index.Endpoint) {
	f.b.PutEndpoints(svc, index.EndpointGroup{Source: f.sym(source), Ports: ports, Endpoints: eps})
}

func (f *fixture) epPort(name string, port uint32) index.EndpointPort {
	return index.EndpointPort{Name: f.sym(name), Port: port}
}

// config puts an Istio config object; its hash covers the spec, namespace
// and name (ingest hashes the whole object).
func (f *fixture) config(kind index.ConfigKind, ns, name string, spec proto.Message, hosts ...string) index.ConfigKey {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		f.t.Fatal(err)
	}
	d := xxhash.New()
	_, _ = d.WriteString(ns + "/" + name + "/" + kind.String() + "/")
	_, _ = d.Write(b)
	c := index.Config{Kind: kind, Key: index.ConfigKey{Namespace: f.sym(ns), Name: f.sym(name)}, Spec: spec, Hash: d.Sum64()}
	for _, h := range hosts {
		c.Hosts = append(c.Hosts, f.sym(h))
	}
	f.b.PutConfig(c)
	return c.Key
}

func (f *fixture) apply() *index.Snapshot {
	f.w.Apply(&f.b)
	f.b = index.Batch{}
	f.snap = f.w.Snapshot()
	return f.snap
}

func (f *fixture) svc(k index.ServiceKey) *index.Service {
	s, _, ok := f.snap.Service(k)
	if !ok {
		f.t.Fatalf("no service %v", k)
	}
	return s
}

func (f *fixture) cfg(kind index.ConfigKind, k index.ConfigKey) *index.Config {
	c, ok := f.snap.Config(kind, k)
	if !ok {
		f.t.Fatalf("no config %v", k)
	}
	return c
}

// clusterKey is an outbound key for a service's first port, as the engine
// builds it for a sidecar.
func (f *fixture) clusterKey(svc index.ServiceKey) *encode.ClusterKey {
	s := f.svc(svc)
	return &encode.ClusterKey{
		Role:      encode.ClusterOutbound,
		Mesh:      encode.DefaultMesh(),
		ProxyType: encode.ProxySidecar,
		Service:   s,
		Port:      s.Ports[0],
		MTLS:      encode.ServiceMTLSPermissive,
		ClusterID: "Kubernetes",
	}
}

// endpointsKey is the EDS key of a service's first port.
func (f *fixture) endpointsKey(svc index.ServiceKey) *encode.EndpointsKey {
	s := f.svc(svc)
	return &encode.EndpointsKey{
		ClusterName:   encode.ClusterName(s.Ports[0].Number, "", f.snap.String(s.Key.Host)),
		Service:       s,
		Shard:         f.snap.Endpoints(s.Key),
		Port:          s.Ports[0],
		SendUnhealthy: true,
		ClusterID:     "Kubernetes",
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
