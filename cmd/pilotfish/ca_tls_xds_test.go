package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/engine"
)

// The TLS port serves xDS too, with a certificate from pilotfish's own CA
// for istiod's name: a client that trusts the root written to
// --root-cert-out (as istio-agent with XDS_ROOT_CA does) and presents a
// certificate of its namespace from the CA gets its clusters over TLS,
// through the raw-bytes codec. (Who may ask for what: xds_identity_test.go.)
func TestCATLSPortServesXDS(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root-cert.pem")
	iss := newTestIssuer(t, "https://issuer.pilotfish.test", "istio-ca")
	s := startCAServe(t, caOptions{tlsAddr: "127.0.0.1:0", rootCertOut: root, jwtRule: iss.rule})
	cert := issueFiles(t, s.grpcAddr.String(), iss.token(t, "shop", "client", "istio-ca", time.Hour), filepath.Join(t.TempDir(), "client"))
	rootPEM, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatal("no root written")
	}
	cc, err := grpc.NewClient(s.grpcTLSAddr.String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: roots, ServerName: ca.DefaultServingDNSName, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{
		Node:    &corev3.Node{Id: "sidecar~10.244.0.9~client-0.shop~shop.svc.cluster.local"},
		TypeUrl: engine.TypeCluster,
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("CDS over TLS: %v", err)
	}
	if resp.TypeUrl != engine.TypeCluster || len(resp.Resources) == 0 {
		t.Fatalf("response %s with %d resources", resp.TypeUrl, len(resp.Resources))
	}

	// A client that does not trust the root cannot connect.
	bad, err := grpc.NewClient(s.grpcTLSAddr.String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: x509.NewCertPool(), ServerName: ca.DefaultServingDNSName, MinVersion: tls.VersionTLS12,
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bctx, bcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer bcancel()
	bs, err := discoveryv3.NewAggregatedDiscoveryServiceClient(bad).StreamAggregatedResources(bctx)
	if err == nil {
		_, err = bs.Recv()
	}
	if err == nil {
		t.Fatal("a client without the root was served")
	}
}
