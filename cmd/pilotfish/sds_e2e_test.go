package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

// gatewaySecretYAML is Secret gw-cert of namespace gw with a certificate
// and key, base64 as kubectl writes them.
func gatewaySecretYAML(cert, key []byte) string {
	b64 := base64.StdEncoding.EncodeToString
	return "apiVersion: v1\nkind: Secret\nmetadata: {name: gw-cert, namespace: gw}\ntype: kubernetes.io/tls\ndata:\n" +
		"  tls.crt: " + b64(cert) + "\n  tls.key: " + b64(key) + "\n"
}

// sdsStream opens an ADS stream as router gw-0.gw and asks for
// kubernetes://gw-cert.
func sdsStream(t *testing.T, cc *grpc.ClientConn) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "gw", "CLUSTER_ID": "Kubernetes"})
	if err := stream.Send(&discoveryv3.DiscoveryRequest{
		Node:          &corev3.Node{Id: "router~10.244.0.30~gw-0.gw~gw.svc.cluster.local", Metadata: md},
		TypeUrl:       engine.TypeSecret,
		ResourceNames: []string{"kubernetes://gw-cert"},
	}); err != nil {
		t.Fatal(err)
	}
	return stream
}

// certOf returns the certificate chain of the response's one Secret.
func certOf(t *testing.T, r *discoveryv3.DiscoveryResponse) []byte {
	t.Helper()
	if len(r.Resources) != 1 {
		t.Fatalf("%d secrets, want 1", len(r.Resources))
	}
	s := &tlsv3.Secret{}
	if err := r.Resources[0].UnmarshalTo(s); err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	return s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()
}

// TestSDSGatewayCredentials: a router whose client certificate (from
// pilotfish's CA) proves an identity in its namespace gets the Secret it
// names over ADS on the TLS port, and the new certificate when the Secret
// changes; the same request over plaintext, or from an identity of another
// namespace, gets no credential; the Secret's key never shows in
// /debug/configz or /debug/config_dump. Secrets come from the config
// directory, and from a real API server with --watch-secrets.
func TestSDSGatewayCredentials(t *testing.T) {
	if got, want := ingest.CredentialKeys(), encode.CredentialKeys; !bytes.Equal([]byte(fmtList(got)), []byte(fmtList(want))) {
		t.Fatalf("ingest keeps %v, encode serves %v", got, want)
	}
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		writeAtomic(t, dir, "mesh.yaml", svcYAML)
		testSDS(t, func(co caOptions) started { return startCAServeDir(t, dir, co) },
			func(y string) { writeAtomic(t, dir, "secret.yaml", y) })
	})
	t.Run("kubernetes", func(t *testing.T) {
		c := kubetest.Start(t, kubetest.Options{})
		c.EnsureNamespace(t, "gw")
		apply := func(y string) {
			file := filepath.Join(t.TempDir(), "secret.yaml")
			if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := c.Kubectl(t, "apply", "-f", file); err != nil {
				t.Fatalf("kubectl apply: %v\n%s", err, out)
			}
		}
		testSDS(t, func(co caOptions) started {
			return startServeWith(t, &serveOptions{ca: co, kube: kubeOptions{kubeconfig: c.Kubeconfig, clusterID: kubeClusterID,
				discoveryInterval: 200 * time.Millisecond, watchSecrets: true}})
		}, apply)
	})
}

// testSDS runs the scenario against a server start starts, whose Secret
// gw/gw-cert write sets.
func testSDS(t *testing.T, start func(caOptions) started, write func(secretYAML string)) {
	iss := newTestIssuer(t, "https://issuer.pilotfish.test", "istio-ca")
	cert1, key1 := testcert.SelfSigned(t, "gw.example.com")
	write(gatewaySecretYAML(cert1, key1))
	root := filepath.Join(t.TempDir(), "root-cert.pem")
	s := start(caOptions{jwtRule: iss.rule, tlsAddr: "127.0.0.1:0", rootCertOut: root})

	rootPEM, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	dialTLS := func(ns, sa string) *grpc.ClientConn {
		c := issueFiles(t, s.grpcAddr.String(), iss.token(t, ns, sa, "istio-ca", time.Hour), filepath.Join(t.TempDir(), sa))
		cc, err := grpc.NewClient(s.grpcTLSAddr.String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: roots, ServerName: ca.DefaultServingDNSName, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{c},
		})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}

	gw := sdsStream(t, dialTLS("gw", "gateway"))
	r, err := gw.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := certOf(t, r); !bytes.Equal(got, cert1) {
		t.Fatal("the router did not get the Secret's certificate")
	}

	// A rotated certificate is pushed.
	cert2, key2 := testcert.SelfSigned(t, "gw.example.com")
	if err := gw.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeSecret, ResourceNames: []string{"kubernetes://gw-cert"},
		VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}); err != nil {
		t.Fatal(err)
	}
	write(gatewaySecretYAML(cert2, key2))
	r, err = gw.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := certOf(t, r); !bytes.Equal(got, cert2) {
		t.Fatal("the rotated certificate was not pushed")
	}

	// Plaintext: no credential. An identity of another namespace: the
	// stream itself is refused (the node is not the caller's).
	plain, err := grpc.NewClient(s.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	r, err = sdsStream(t, plain).Recv()
	if err != nil {
		t.Fatalf("plaintext: %v", err)
	}
	if len(r.Resources) != 0 {
		t.Errorf("plaintext: %d secrets served", len(r.Resources))
	}
	if _, err := sdsStream(t, dialTLS("other", "gateway")).Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("identity of namespace other: %v, want PermissionDenied", err)
	}

	// Never in debug output.
	keyB64 := base64.StdEncoding.EncodeToString(key2)
	for path, listed := range map[string]string{"/debug/configz": `"gw-cert"`, "/debug/config_dump?proxyID=gw-0.gw": "kubernetes://gw-cert"} {
		code, b := get(t, "http://"+s.httpAddr.String()+path)
		if code != http.StatusOK || !bytes.Contains(b, []byte(listed)) {
			t.Errorf("%s: %d, without %s: %.300s", path, code, listed, b)
		}
		if bytes.Contains(b, key2) || bytes.Contains(b, []byte(keyB64)) || bytes.Contains(b, key2[40:80]) {
			t.Errorf("%s shows the private key", path)
		}
	}
}

// writeAtomic writes dir/name through a rename, so the watcher sees one
// complete change.
func writeAtomic(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for serve's /ready.
func waitReady(t *testing.T, base string) {
	t.Helper()
	eventually(t, "serve ready", func() string {
		if code, b := get(t, base+"/ready"); code != http.StatusOK {
			return fmt.Sprintf("/ready: %d %s", code, b)
		}
		return ""
	})
}

func fmtList(l []string) string { return strings.Join(l, ",") }
