package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/engine"

	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

// credentialSecretsYAML is two more Secrets of namespace gw: broken (a
// certificate with another certificate's key: refused, and logged by name)
// and badkey (a key name the API server refuses, whose value is key
// material: a config error).
func credentialSecretsYAML(cert, key, otherKey []byte) string {
	b64 := base64.StdEncoding.EncodeToString
	return "apiVersion: v1\nkind: Secret\nmetadata: {name: broken, namespace: gw}\ntype: kubernetes.io/tls\ndata:\n" +
		"  tls.crt: " + b64(cert) + "\n  tls.key: " + b64(otherKey) + "\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: badkey, namespace: gw}\ndata:\n" +
		"  \"tls key\": " + b64(key) + "\n"
}

// deltaSDS opens a Delta ADS stream as router gw-1.gw subscribing names.
func deltaSDS(t *testing.T, cc *grpc.ClientConn, names ...string) discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "gw", "CLUSTER_ID": "Kubernetes"})
	if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{
		Node:                   &corev3.Node{Id: "router~10.244.0.31~gw-1.gw~gw.svc.cluster.local", Metadata: md},
		TypeUrl:                engine.TypeSecret,
		ResourceNamesSubscribe: names,
	}); err != nil {
		t.Fatal(err)
	}
	return stream
}

// recvDelta receives one Delta response, checks and ACKs it, and returns
// the certificate chain of each Secret it carries and its removals.
func recvDelta(t *testing.T, s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) (map[string][]byte, []string) {
	t.Helper()
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, res := range r.Resources {
		sec := &tlsv3.Secret{}
		if err := res.GetResource().UnmarshalTo(sec); err != nil {
			t.Fatal(err)
		}
		if err := sec.ValidateAll(); err != nil {
			t.Fatalf("%s: %v", res.Name, err)
		}
		if sec.Name != res.Name {
			t.Fatalf("resource %q holds Secret %q", res.Name, sec.Name)
		}
		got[res.Name] = sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes()
	}
	if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeSecret, ResponseNonce: r.Nonce}); err != nil {
		t.Fatal(err)
	}
	return got, r.RemovedResources
}

// keyTraces are byte strings whose presence shows key material: the PEM,
// its base64 (Secret data, JSON bytes), and a slice of each (a key quoted
// in part, or JSON-escaped across lines).
func keyTraces(keys ...[]byte) [][]byte {
	var out [][]byte
	for _, k := range keys {
		b := []byte(base64.StdEncoding.EncodeToString(k))
		out = append(out, k, k[40:80], b, b[60:100])
	}
	return out
}

// TestSDSCredentialsNeverShown runs gateway credentials over Delta ADS on
// the TLS port with debug logging and checks that the keys of served,
// refused and invalid Secrets appear in no log line and no debug endpoint,
// while those endpoints do list the Secrets and credentials by name. A
// Secret's rotation is pushed as a Delta update and its deletion as a
// removal; a credential whose Secret cannot serve it is never sent.
func TestSDSCredentialsNeverShown(t *testing.T) {
	iss := newTestIssuer(t, "https://issuer.pilotfish.test", "istio-ca")
	cert1, key1 := testcert.SelfSigned(t, "gw.example.com")
	cert2, key2 := testcert.SelfSigned(t, "gw.example.com")
	_, otherKey := testcert.SelfSigned(t, "other.example.com")
	traces := keyTraces(key1, key2, otherKey)

	dir := t.TempDir()
	writeAtomic(t, dir, "mesh.yaml", svcYAML)
	writeAtomic(t, dir, "secrets.yaml", credentialSecretsYAML(cert1, key1, otherKey))
	writeAtomic(t, dir, "gw-cert.yaml", gatewaySecretYAML(cert1, key1))
	if f, _ := os.ReadFile(filepath.Join(dir, "gw-cert.yaml")); !bytes.Contains(f, traces[2]) || !bytes.Contains(f, traces[3]) {
		t.Fatal("the traces do not match key material as a Secret holds it")
	}
	root := filepath.Join(t.TempDir(), "root-cert.pem")
	logs := &lockedBuffer{}
	s := startServeWith(t, &serveOptions{configDir: dir, logLevel: "debug", logOut: logs,
		ca: caOptions{jwtRule: iss.rule, tlsAddr: "127.0.0.1:0", rootCertOut: root}})

	rootPEM, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	c := issueFiles(t, s.grpcAddr.String(), iss.token(t, "gw", "gateway", "istio-ca", time.Hour), filepath.Join(t.TempDir(), "gw"))
	cc, err := grpc.NewClient(s.grpcTLSAddr.String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: roots, ServerName: ca.DefaultServingDNSName, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{c},
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })

	stream := deltaSDS(t, cc, "kubernetes://gw-cert", "kubernetes://broken", "kubernetes://missing", "kubernetes://badkey")
	got, _ := recvDelta(t, stream)
	if len(got) != 1 || !bytes.Equal(got["kubernetes://gw-cert"], cert1) {
		t.Fatalf("first response: %d secrets %v, want kubernetes://gw-cert with its certificate", len(got), slices.Sorted(maps.Keys(got)))
	}

	// Rotation: the new certificate as a Delta update.
	writeAtomic(t, dir, "gw-cert.yaml", gatewaySecretYAML(cert2, key2))
	if got, _ = recvDelta(t, stream); len(got) != 1 || !bytes.Equal(got["kubernetes://gw-cert"], cert2) {
		t.Fatalf("after rotation: %d secrets, want the rotated kubernetes://gw-cert", len(got))
	}

	// Every debug endpoint, with the Secrets in the index and a proxy
	// holding one: names shown, material never.
	base := "http://" + s.httpAddr.String()
	keyz := "/debug/keyz?proxyID=gw-1.gw&type=" + url.QueryEscape(engine.TypeSecret) + "&resource=" + url.QueryEscape("kubernetes://gw-cert")
	for path, listed := range map[string]string{
		"/debug/configz": `"broken"`, "/debug/config_dump?proxyID=gw-1.gw": "kubernetes://gw-cert", keyz: `"gw-cert"`,
		"/debug/config_errors": "tls key", "/debug/registryz": "", "/debug/syncz": "gw-1.gw", "/debug/connections": "gw-1.gw",
		"/debug/push_status": "", "/debug/cachez": "", "/debug/endpointz": "", "/metrics": "",
	} {
		code, b := get(t, base+path)
		if code != http.StatusOK || !bytes.Contains(b, []byte(listed)) {
			t.Errorf("%s: %d, without %q: %.400s", path, code, listed, b)
		}
		for i, tr := range traces {
			if bytes.Contains(b, tr) {
				t.Errorf("%s shows key material (trace %d)", path, i)
			}
		}
	}

	// Deletion: removed from the proxy.
	if err := os.Remove(filepath.Join(dir, "gw-cert.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, removed := recvDelta(t, stream); !slices.Equal(removed, []string{"kubernetes://gw-cert"}) {
		t.Fatalf("after deletion: removed %v, want [kubernetes://gw-cert]", removed)
	}

	// The logs name what was refused and why, and hold no material.
	out := []byte(logs.String())
	for _, want := range []string{"kubernetes://broken", "kubernetes://missing", "tls key"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the debug log does not mention %q", want)
		}
	}
	for i, tr := range traces {
		if bytes.Contains(out, tr) {
			t.Errorf("the log shows key material (trace %d)", i)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%.4000s", out)
	}
}
