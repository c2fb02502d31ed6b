package main

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

// ratingsOtherYAML is a second service, in namespace other.
const ratingsOtherYAML = `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: other}
spec:
  clusterIP: 10.96.0.11
  ports: [{name: http, port: 9080}]
`

// meshRootCM is ConfigMap istio with rootNamespace ROOT.
func meshRootCM(root string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    rootNamespace: " + root + "\n"
}

// TestMeshRootNamespaceChange: a rootNamespace change at run time (ConfigMap
// istio in --config-dir) pushes the proxies it affects, to real ADS
// clients: the Sidecar of the new root namespace now applies to every
// namespace, so a proxy of shop no longer sees other's service and one of
// other no longer sees shop's. The xDS server's root namespace follows: on
// the TLS port a caller of the new root namespace may ask for a type the
// engine does not serve (an empty answer, istiod's api generator), one of
// the old is refused.
func TestMeshRootNamespaceChange(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		// A rename: the poll never reads half a file.
		tmp := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("reviews.yaml", svcYAML)
	write("ratings.yaml", ratingsOtherYAML)
	write("sidecar.yaml", rootSidecarYAML) // in mesh-root
	write("mesh.yaml", meshRootCM("istio-system"))

	caCert, caKey := testcert.SelfSigned(t, "mesh-root")
	cacerts := t.TempDir()
	for name, b := range map[string][]byte{ca.CACertFile: caCert, ca.CAKeyFile: caKey, ca.RootCertFile: caCert} {
		if err := os.WriteFile(filepath.Join(cacerts, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	is := &identityServe{roots: x509.NewCertPool(), caCert: caCert, caKey: caKey}
	is.roots.AppendCertsFromPEM(caCert)
	is.started = startCAServeDir(t, dir, caOptions{tlsAddr: "127.0.0.1:0", cacertsDir: cacerts, trustDomain: "cluster.local"})

	const (
		reviews = "outbound|9080||reviews.shop.svc.cluster.local"
		ratings = "outbound|9080||ratings.other.svc.cluster.local"
	)
	clusters := func(r *discoveryv3.DiscoveryResponse) []string {
		var names []string
		for _, a := range r.GetResources() {
			c := &clusterv3.Cluster{}
			if err := proto.Unmarshal(a.GetValue(), c); err != nil {
				t.Fatal(err)
			}
			names = append(names, c.GetName())
		}
		return names
	}
	shop := newADSClient(t, is.grpcAddr.String(), "reviews-0", "shop", "10.244.0.5")
	shop.ackAll()
	other := newADSClient(t, is.grpcAddr.String(), "ratings-0", "other", "10.244.0.6")
	other.ackAll()
	for _, c := range []*adsClient{shop, other} {
		if got := clusters(c.request(engine.TypeCluster)); !slices.Contains(got, reviews) || !slices.Contains(got, ratings) {
			t.Fatalf("before the change, a proxy sees %v: want both services (the Sidecar is not in the root namespace)", got)
		}
	}

	// ask opens a stream on the TLS port as a caller of namespace ns and
	// asks for a type the engine does not serve.
	const runtimeType = "type.googleapis.com/envoy.service.runtime.v3.Runtime"
	ask := func(ns string) (*discoveryv3.DiscoveryResponse, error) {
		t.Helper()
		now := time.Now()
		cert := testcert.Leaf(t, caCert, caKey, "spiffe://cluster.local/ns/"+ns+"/sa/ctl", now.Add(-time.Minute), now.Add(time.Hour))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(is.dialTLS(t, &cert)).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: xdsNode(t, "ctl-0", ns, ns, "ctl"), TypeUrl: runtimeType}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		return st.Recv()
	}
	if r, err := ask("istio-system"); err != nil || len(r.GetResources()) != 0 {
		t.Fatalf("root namespace istio-system: %v, %v; want an empty answer", r, err)
	}
	if _, err := ask("mesh-root"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("mesh-root before the change: %v, want PermissionDenied", err)
	}

	write("mesh.yaml", meshRootCM("mesh-root"))
	// Each proxy is pushed a CDS without the other namespace's service
	// (recv is bounded: the 2 s poll, the debounce and the push).
	if got := clusters(shop.recv(engine.TypeCluster)); !slices.Contains(got, reviews) || slices.Contains(got, ratings) {
		t.Errorf("after the change, shop's proxy was pushed %v: want reviews.shop only (mesh-root's Sidecar)", got)
	}
	if got := clusters(other.recv(engine.TypeCluster)); slices.Contains(got, reviews) || !slices.Contains(got, ratings) {
		t.Errorf("after the change, other's proxy was pushed %v: want ratings.other only (mesh-root's Sidecar)", got)
	}
	if r, err := ask("mesh-root"); err != nil || len(r.GetResources()) != 0 {
		t.Errorf("new root namespace mesh-root: %v, %v; want an empty answer", r, err)
	}
	if _, err := ask("istio-system"); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"mesh-root"`) {
		t.Errorf("old root namespace istio-system after the change: %v, want PermissionDenied naming mesh-root", err)
	}
}
