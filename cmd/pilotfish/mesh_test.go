package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

const meshCMYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: istio
  namespace: istio-system
data:
  mesh: |
    rootNamespace: mesh-root
    connectTimeout: 3s
    enableAutoMtls: false
    outboundTrafficPolicy:
      mode: REGISTRY_ONLY
    enableEnvoyAccessLogService: true
`

// rootSidecarYAML limits every namespace's proxies to their own
// namespace, when mesh-root is the root namespace.
const rootSidecarYAML = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: mesh-root
spec:
  egress:
  - hosts: ["./*"]
`

// fetch asks the server for typ (wildcard) as a sidecar of ns and returns
// the resources' bytes.
func fetch(t *testing.T, addr, ns, typ string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "ISTIO_VERSION": "1.31.0", "INSTANCE_IPS": "10.1.0.9"})
	if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typ, Node: &corev3.Node{Id: "sidecar~10.1.0.9~c-1." + ns + "~" + ns + ".svc.cluster.local", Metadata: md}}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, a := range r.Resources {
		out = append(out, a.Value)
	}
	return out
}

// TestMeshConfigFieldsServed: a ConfigMap istio in --config-dir is the
// mesh config: connectTimeout, enableAutoMtls, outboundTrafficPolicy
// and rootNamespace (a Sidecar there applies to
// every namespace) reach the proxies; the unsupported field set is
// listed in /debug/config_errors; a bad change keeps the last good
// config and is listed.
func TestMeshConfigFieldsServed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("reviews.yaml", svcYAML)
	write("mesh.yaml", meshCMYAML)
	write("sidecar.yaml", rootSidecarYAML)
	s := startServeAddrs(t, dir)
	addr, base := s.grpcAddr.String(), "http://"+s.httpAddr.String()
	const cluster = "outbound|9080||reviews.shop.svc.cluster.local"

	var found *clusterv3.Cluster
	for _, b := range fetch(t, addr, "shop", engine.TypeCluster) {
		c := &clusterv3.Cluster{}
		if err := proto.Unmarshal(b, c); err != nil {
			t.Fatal(err)
		}
		if c.Name == cluster {
			found = c
		}
	}
	if found == nil {
		t.Fatalf("no %s for a proxy of shop", cluster)
	}
	if d := found.ConnectTimeout.AsDuration(); d != 3*time.Second {
		t.Errorf("connect timeout %v, want 3s (connectTimeout)", d)
	}
	if len(found.TransportSocketMatches) != 0 {
		t.Errorf("auto mTLS transport socket matches with enableAutoMtls false: %v", found.TransportSocketMatches)
	}
	// rootNamespace: the Sidecar in mesh-root scopes the other namespace.
	for _, b := range fetch(t, addr, "other", engine.TypeCluster) {
		if strings.Contains(string(b), "reviews.shop") {
			t.Errorf("a proxy of namespace other sees reviews.shop: the root namespace's Sidecar is not applied")
		}
	}
	var virt *listenerv3.Listener
	for _, b := range fetch(t, addr, "shop", engine.TypeListener) {
		l := &listenerv3.Listener{}
		if err := proto.Unmarshal(b, l); err != nil {
			t.Fatal(err)
		}
		if l.Name == "virtualOutbound" {
			virt = l
		}
	}
	if virt == nil {
		t.Fatal("no virtualOutbound listener")
	}
	if !strings.Contains(virt.String(), "BlackHoleCluster") || strings.Contains(virt.String(), "PassthroughCluster") {
		t.Errorf("virtualOutbound does not send unknown destinations to BlackHoleCluster (REGISTRY_ONLY)")
	}
	_, errs := get(t, base+"/debug/config_errors")
	if !strings.Contains(string(errs), "mesh.enableEnvoyAccessLogService") {
		t.Errorf("config_errors does not list the unsupported field: %s", errs)
	}

	// A bad change is refused and listed; the last good config stays.
	write("mesh.yaml", strings.Replace(meshCMYAML, "connectTimeout: 3s", "connectTimeout: 3 parsecs", 1))
	eventually(t, "bad mesh config listed", func() string {
		if _, b := get(t, base+"/debug/config_errors"); !strings.Contains(string(b), "mesh.connectTimeout") {
			return string(b)
		}
		return ""
	})
	if !strings.Contains(string(mustFetchString(t, addr)), "BlackHoleCluster") {
		t.Error("the last good mesh config was lost")
	}
	// A good change applies: ALLOW_ANY again.
	write("mesh.yaml", strings.Replace(meshCMYAML, "REGISTRY_ONLY", "ALLOW_ANY", 1))
	eventually(t, "ALLOW_ANY applied", func() string {
		if s := mustFetchString(t, addr); !strings.Contains(s, "PassthroughCluster") {
			return "no PassthroughCluster"
		}
		return ""
	})
}

func mustFetchString(t *testing.T, addr string) string {
	var b strings.Builder
	for _, r := range fetch(t, addr, "shop", engine.TypeListener) {
		b.Write(r)
	}
	return b.String()
}

// TestMeshSettingsPrecedence: the mesh config's trustDomain,
// trustDomainAliases and outboundTrafficPolicy apply unless the flag was
// given explicitly; a trust domain other than the CA's is a warning.
func TestMeshSettingsPrecedence(t *testing.T) {
	s := &meshState{log: slog.New(slog.DiscardHandler), overrides: map[string]bool{},
		base:  engine.MeshSettings{TrustDomain: "cluster.local"},
		apply: func(engine.MeshSettings) error { return nil }, caTD: "cluster.local"}
	s.errCount = newTestCounter()
	in := meshInput{origin: "test", present: true, mesh: []byte("trustDomain: td.example\ntrustDomainAliases: [old.example]\noutboundTrafficPolicy: {mode: REGISTRY_ONLY}\n")}
	var got engine.MeshSettings
	s.apply = func(st engine.MeshSettings) error { got = st; return nil }
	if err := s.set(meshFromFile, in); err != nil {
		t.Fatal(err)
	}
	if got.TrustDomain != "td.example" || got.OutboundTrafficPolicy != "REGISTRY_ONLY" || strings.Join(got.TrustDomainAliases, ",") != "old.example" {
		t.Errorf("mesh config not applied: %+v", got)
	}
	if errs := s.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "differs from the CA") {
		t.Errorf("no trust domain mismatch warning: %v", errs)
	}
	s.flags = meshFlags{trustDomain: "flag.example", trustDomainSet: true, outboundPolicy: "ALLOW_ANY", outboundSet: true}
	if err := s.set(meshFromFile, in); err != nil {
		t.Fatal(err)
	}
	if got.TrustDomain != "flag.example" || got.OutboundTrafficPolicy != "ALLOW_ANY" {
		t.Errorf("explicit flags do not win: %+v", got)
	}
	// A bad document keeps the last good settings.
	got = engine.MeshSettings{}
	if err := s.set(meshFromFile, meshInput{origin: "test", present: true, mesh: []byte("connectTimeout: x\n")}); err == nil {
		t.Fatal("bad mesh config accepted")
	}
	if got.TrustDomain != "" || s.current == nil {
		t.Error("a bad mesh config was applied or lost the last good one")
	}
}

func newTestCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "test_mesh_errors"})
}
