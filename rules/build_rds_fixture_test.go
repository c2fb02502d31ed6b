package rules

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// meshFixture builds index rows directly, the way ingest would, for LDS and
// RDS tests.
type meshFixture struct {
	t testing.TB
	w *index.Writer
	b index.Batch
}

func newMeshFixture(t testing.TB) *meshFixture {
	return &meshFixture{t: t, w: index.NewWriter()}
}

func (f *meshFixture) sym(s string) index.Sym { return f.w.Symbols().Intern(s) }

func prefixes(t testing.TB, addrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a); err == nil {
			out = append(out, p)
			continue
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			t.Fatalf("bad address %q", a)
		}
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out
}

// serviceEntry adds one service per host, as ingest does.
func (f *meshFixture) serviceEntry(name, ns string, hosts, addrs []string, res index.Resolution, ports ...index.Port) []index.ServiceKey {
	var keys []index.ServiceKey
	for _, h := range hosts {
		k := index.ServiceKey{Host: f.sym(h), Namespace: f.sym(ns)}
		f.b.PutService(index.Service{
			Key: k, Name: f.sym(name), Origin: index.OriginServiceEntry,
			Addresses: prefixes(f.t, addrs), Ports: ports, Resolution: res,
		})
		keys = append(keys, k)
	}
	return keys
}

// kubeService adds a Kubernetes Service; clusterIP "None" makes it headless.
func (f *meshFixture) kubeService(name, ns, clusterIP string, ports ...index.Port) index.ServiceKey {
	k := index.ServiceKey{Host: f.sym(name + "." + ns + ".svc.cluster.local"), Namespace: f.sym(ns)}
	s := index.Service{Key: k, Name: f.sym(name), Origin: index.OriginKubernetes, Ports: ports}
	if clusterIP == "None" {
		s.Resolution = index.ResolutionPassthrough
	} else if clusterIP != "" {
		s.Addresses = prefixes(f.t, []string{clusterIP})
	}
	f.b.PutService(s)
	return k
}

func (f *meshFixture) put(s index.Service) { f.b.PutService(s) }

func httpPort(n uint32) index.Port { return index.Port{Number: n, Protocol: index.ProtocolHTTP} }

func port(n uint32, p index.Protocol) index.Port { return index.Port{Number: n, Protocol: p} }

// virtualService adds a VirtualService; hosts are resolved to FQDNs as
// ingest does.
func (f *meshFixture) virtualService(name, ns string, vs *networking.VirtualService) *index.Config {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(vs)
	if err != nil {
		f.t.Fatal(err)
	}
	c := index.Config{
		Kind: index.ConfigVirtualService,
		Key:  index.ConfigKey{Namespace: f.sym(ns), Name: f.sym(name)},
		Spec: vs,
		Hash: xxhash.Sum64(b) ^ xxhash.Sum64String(ns+"/"+name),
	}
	for _, e := range vs.ExportTo {
		switch e {
		case ".":
			c.ExportTo.Private = true
		case "~":
			c.ExportTo.None = true
		case "*":
		default:
			c.ExportTo.Namespaces = append(c.ExportTo.Namespaces, f.sym(e))
		}
	}
	for _, h := range vs.Hosts {
		if h != "*" && !strings.Contains(h, ".") {
			h = h + "." + ns + ".svc.cluster.local"
		}
		c.Hosts = append(c.Hosts, f.sym(h))
	}
	f.b.PutConfig(c)
	return &c
}

func (f *meshFixture) endpoints(svc index.ServiceKey, source string, ports []index.EndpointPort, addrs ...string) {
	g := index.EndpointGroup{Source: f.sym(source), Ports: ports}
	for _, a := range addrs {
		g.Endpoints = append(g.Endpoints, index.Endpoint{Addr: netip.MustParseAddr(a)})
	}
	f.b.PutEndpoints(svc, g)
}

// apply publishes the batch and returns the snapshot.
func (f *meshFixture) apply() *index.Snapshot {
	f.w.Apply(&f.b)
	f.b = index.Batch{}
	return f.w.Snapshot()
}

func sidecarClass(ns string) *encode.ProxyClass {
	return &encode.ProxyClass{Type: encode.ProxySidecar, Namespace: ns, IstioVersion: "1.31", ClusterID: "Kubernetes"}
}

func grpcClass(ns string) *encode.ProxyClass {
	return &encode.ProxyClass{Type: encode.ProxyGRPC, Namespace: ns, IstioVersion: "1.31", ClusterID: "Kubernetes"}
}

// decodeResources unmarshals Any-encoded resources into messages of T.
func decodeRoutes(t testing.TB, rs []Resource) []*route.RouteConfiguration {
	t.Helper()
	var out []*route.RouteConfiguration
	for _, r := range rs {
		m := &route.RouteConfiguration{}
		decodeAny(t, r, m)
		out = append(out, m)
	}
	return out
}

func decodeListeners(t testing.TB, rs []Resource) []*listener.Listener {
	t.Helper()
	var out []*listener.Listener
	for _, r := range rs {
		m := &listener.Listener{}
		decodeAny(t, r, m)
		out = append(out, m)
	}
	return out
}

func decodeAny(t testing.TB, r Resource, m proto.Message) {
	t.Helper()
	a := &anypb.Any{}
	if err := proto.Unmarshal(r.Any, a); err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
}

// validate runs go-control-plane's generated validation on every message.
func validate(t testing.TB, msgs ...interface{ ValidateAll() error }) {
	t.Helper()
	for _, m := range msgs {
		if err := m.ValidateAll(); err != nil {
			t.Errorf("invalid %T: %v", m, err)
		}
	}
}

// istiodOutput reads one of istiod's reference config dumps.
func istiodOutput(t testing.TB, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(istiodOutputDir, file))
	if err != nil {
		t.Skipf("istiod reference output not available: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const istiodOutputDir = "../../shared/workloads/istio-bench/istiod-output"

// istiodRoutes returns the route configurations of an istiod config dump.
func istiodRoutes(t testing.TB, file string) map[string]*route.RouteConfiguration {
	t.Helper()
	out := map[string]*route.RouteConfiguration{}
	for _, c := range istiodOutput(t, file)["configs"].([]any) {
		cm := c.(map[string]any)
		if cm["@type"] != "type.googleapis.com/envoy.admin.v3.RoutesConfigDump" {
			continue
		}
		for _, d := range asList(cm["dynamicRouteConfigs"]) {
			rc := &route.RouteConfiguration{}
			unmarshalJSON(t, d.(map[string]any)["routeConfig"], rc)
			out[rc.Name] = rc
		}
	}
	return out
}

// istiodListeners returns the listeners of an istiod config dump.
func istiodListeners(t testing.TB, file string) map[string]*listener.Listener {
	t.Helper()
	out := map[string]*listener.Listener{}
	for _, c := range istiodOutput(t, file)["configs"].([]any) {
		cm := c.(map[string]any)
		if cm["@type"] != "type.googleapis.com/envoy.admin.v3.ListenersConfigDump" {
			continue
		}
		for _, d := range asList(cm["dynamicListeners"]) {
			l := &listener.Listener{}
			unmarshalJSON(t, d.(map[string]any)["activeState"].(map[string]any)["listener"], l)
			out[l.Name] = l
		}
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func unmarshalJSON(t testing.TB, v any, m proto.Message) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		t.Fatalf("%T: %v", m, err)
	}
}

// goldenJSON renders a message as stable, indented JSON.
func goldenJSON(t testing.TB, msgs ...proto.Message) []byte {
	t.Helper()
	var parts []json.RawMessage
	for _, m := range msgs {
		b, err := protojson.MarshalOptions{}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, b)
	}
	out, err := json.MarshalIndent(parts, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func fmtPort(p uint32) string { return fmt.Sprint(p) }

// protoDiff returns "" when a and b are equal, else a line diff of their
// JSON forms (the first differing region, with context).
func protoDiff(t testing.TB, a, b proto.Message) string {
	t.Helper()
	if proto.Equal(a, b) {
		return ""
	}
	al := strings.Split(string(goldenJSON(t, a)), "\n")
	bl := strings.Split(string(goldenJSON(t, b)), "\n")
	i := 0
	for i < len(al) && i < len(bl) && al[i] == bl[i] {
		i++
	}
	ja, jb := len(al), len(bl)
	for ja > i && jb > i && al[ja-1] == bl[jb-1] {
		ja--
		jb--
	}
	var sb strings.Builder
	from := max(0, i-3)
	for _, l := range al[from:i] {
		sb.WriteString("  " + l + "\n")
	}
	for _, l := range al[i:min(ja, i+40)] {
		sb.WriteString("- " + l + "\n")
	}
	for _, l := range bl[i:min(jb, i+40)] {
		sb.WriteString("+ " + l + "\n")
	}
	return sb.String()
}

func verifyCache() *encode.Cache {
	c := encode.NewCache()
	c.SetVerify(true)
	return c
}
