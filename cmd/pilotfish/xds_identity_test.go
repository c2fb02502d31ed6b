package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// identityServe is `pilotfish serve` with a plug-in CA whose root this test
// holds (so it can mint the certificates an attacker would present: an
// expired one of the mesh, one of a foreign root), a JWT issuer, and the
// TLS port.
type identityServe struct {
	started
	iss           *testIssuer
	root          string // root-cert.pem, as --root-cert-out writes it
	roots         *x509.CertPool
	caCert, caKey []byte
}

func startIdentityServe(t *testing.T) *identityServe { return startIdentityServeDir(t, "") }

// startIdentityServeDir is startIdentityServe on config directory dir (""
// for startCAServe's).
func startIdentityServeDir(t *testing.T, dir string) *identityServe {
	t.Helper()
	s := &identityServe{iss: newTestIssuer(t, "https://issuer.pilotfish.test", "istio-ca"), roots: x509.NewCertPool()}
	s.caCert, s.caKey = testcert.SelfSigned(t, "mesh-root")
	s.roots.AppendCertsFromPEM(s.caCert)
	cacerts := t.TempDir()
	for name, b := range map[string][]byte{ca.CACertFile: s.caCert, ca.CAKeyFile: s.caKey, ca.RootCertFile: s.caCert} {
		if err := os.WriteFile(filepath.Join(cacerts, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.root = filepath.Join(t.TempDir(), "root-cert.pem")
	co := caOptions{tlsAddr: "127.0.0.1:0", cacertsDir: cacerts, jwtRule: s.iss.rule, rootCertOut: s.root,
		trustDomain: "cluster.local", tokenAudiences: []string{"istio-ca"}}
	if dir == "" {
		s.started = startCAServe(t, co)
	} else {
		s.started = startCAServeDir(t, dir, co)
	}
	return s
}

// dialTLS connects to the TLS port trusting the mesh root, presenting cert
// (always, as an attacker would) if not nil.
func (s *identityServe) dialTLS(t *testing.T, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: s.roots, ServerName: ca.DefaultServingDNSName, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	cc, err := grpc.NewClient(s.grpcTLSAddr.String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// xdsNode is a sidecar of pod POD.ns claiming metadata NAMESPACE and
// SERVICE_ACCOUNT (left out when empty).
func xdsNode(t *testing.T, pod, idNS, ns, sa string) *corev3.Node {
	t.Helper()
	md := map[string]any{"CLUSTER_ID": "Kubernetes"}
	if ns != "" {
		md["NAMESPACE"] = ns
	}
	if sa != "" {
		md["SERVICE_ACCOUNT"] = sa
	}
	m, err := structpb.NewStruct(md)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: "sidecar~10.244.0.9~" + pod + "." + idNS + "~" + idNS + ".svc.cluster.local", Metadata: m}
}

// cdsOnce opens a SotW stream (with a bearer token when token is set), asks
// for CDS as n and returns the first response or the stream's error.
func cdsOnce(t *testing.T, cc *grpc.ClientConn, n *corev3.Node, token string) (*discoveryv3.DiscoveryResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	// A Send that fails because the server ended the stream (it refuses
	// before reading) returns io.EOF: Recv has the status.
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: engine.TypeCluster}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return st.Recv()
}

// TestXDSIdentityAttacks: direct attacks on the TLS xDS port of a running
// pilotfish, with a real gRPC client over real TLS. A certificate of
// shop/cart claiming a billing node or the shop/admin account, no
// credential, a token of shop/cart claiming billing, an expired certificate
// of the mesh, a certificate of a foreign root: all refused, each counted
// once in pilotfish_xds_auth_failures_total; the legitimate proxy (by
// certificate and by token) is served before and after. The plaintext port
// serves any node, as istiod's 15010.
func TestXDSIdentityAttacks(t *testing.T) {
	s := startIdentityServe(t)
	cartID := "spiffe://cluster.local/ns/shop/sa/cart"
	leaf := func(uri string, from, to time.Time) *tls.Certificate {
		c := testcert.Leaf(t, s.caCert, s.caKey, uri, from, to)
		return &c
	}
	now := time.Now()
	cartCert := leaf(cartID, now.Add(-time.Minute), now.Add(time.Hour))
	own := s.dialTLS(t, cartCert)
	cartNode := xdsNode(t, "cart-0", "shop", "shop", "cart")
	cartToken := s.iss.token(t, "shop", "cart", "istio-ca", time.Hour)

	served := func(what string, cc *grpc.ClientConn, token string) {
		t.Helper()
		r, err := cdsOnce(t, cc, cartNode, token)
		if err != nil || len(r.GetResources()) == 0 {
			t.Fatalf("%s: %v, %d clusters; want served", what, err, len(r.GetResources()))
		}
	}
	served("certificate", own, "")
	served("token, no certificate", s.dialTLS(t, nil), cartToken)

	foreignCert, foreignKey := testcert.SelfSigned(t, "foreign-root")
	foreign := testcert.Leaf(t, foreignCert, foreignKey, cartID, now.Add(-time.Minute), now.Add(time.Hour))
	for _, tc := range []struct {
		name  string
		cc    *grpc.ClientConn
		token string
		node  *corev3.Node
		code  codes.Code // OK: the TLS handshake fails, whatever the client reports
	}{
		{"certificate, billing node", own, "", xdsNode(t, "billing-0", "billing", "billing", "cart"), codes.PermissionDenied},
		{"certificate, shop/admin", own, "", xdsNode(t, "admin-0", "shop", "shop", "admin"), codes.PermissionDenied},
		{"token, billing node", s.dialTLS(t, nil), cartToken, xdsNode(t, "billing-0", "billing", "", ""), codes.PermissionDenied},
		{"no credential", s.dialTLS(t, nil), "", cartNode, codes.Unauthenticated},
		{"token of another issuer", s.dialTLS(t, nil), newTestIssuer(t, "https://evil.test", "istio-ca").token(t, "shop", "cart", "istio-ca", time.Hour),
			cartNode, codes.Unauthenticated},
		{"expired certificate", s.dialTLS(t, leaf(cartID, now.Add(-2*time.Hour), now.Add(-time.Hour))), "", cartNode, codes.OK},
		{"foreign root", s.dialTLS(t, &foreign), "", cartNode, codes.OK},
	} {
		_, err := cdsOnce(t, tc.cc, tc.node, tc.token)
		if err == nil {
			t.Errorf("%s: served", tc.name)
			continue
		}
		if tc.code != codes.OK && status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
		t.Logf("%s: %v", tc.name, err)
	}

	served("certificate, after the attacks", own, "")
	plain, err := grpc.NewClient(s.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	if r, err := cdsOnce(t, plain, xdsNode(t, "billing-0", "billing", "billing", ""), ""); err != nil || len(r.GetResources()) == 0 {
		t.Errorf("plaintext port: %v; want any node served", err)
	}

	// ECDS (served: WasmPlugins' configs) for a name no plugin has: an
	// empty answer, not counted as a type pilotfish does not serve.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(plain).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: cartNode, TypeUrl: serve.TypeExtensionConfig, ResourceNames: []string{"ext"}}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || r.GetTypeUrl() != serve.TypeExtensionConfig || len(r.GetResources()) != 0 {
		t.Errorf("ECDS: %v, %v; want an empty response", r, err)
	}

	fams := scrape(t, "http://"+s.httpAddr.String())
	for kind, n := range map[string]float64{serve.UnknownECDS: 0, serve.UnknownOther: 0} {
		if v, found := metricValue(fams, "pilotfish_xds_unknown_type_requests_total", "type="+kind); !found || v != n {
			t.Errorf("pilotfish_xds_unknown_type_requests_total{type=%q} = %v (found %v), want %v", kind, v, found, n)
		}
	}
	want := map[string]float64{serve.AuthNamespaceMismatch: 2, serve.AuthServiceAccountMismatch: 1, serve.AuthNoCredential: 1,
		serve.AuthUnauthenticated: 1, serve.AuthCertExpired: 1, serve.AuthCertUntrusted: 1, serve.AuthCertInvalid: 0}
	// A refused handshake is counted by the server's handshake goroutine,
	// which may finish after the client saw the failure: scrape until the
	// counts are in.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var wrong []string
		for reason, n := range want {
			if v, found := metricValue(fams, "pilotfish_xds_auth_failures_total", "reason="+reason); !found || v != n {
				wrong = append(wrong, fmt.Sprintf("{reason=%q} = %v (found %v), want %v", reason, v, found, n))
			}
		}
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pilotfish_xds_auth_failures_total: %s", strings.Join(wrong, "; "))
		}
		fams = scrape(t, "http://"+s.httpAddr.String())
	}
}

// TestXDSIdentityIstioAgent: the real istio-agent, configured as in a
// cluster (controlPlaneAuthPolicy MUTUAL_TLS, XDS_ROOT_CA), proxies xDS to
// the TLS port with its service account token (and, with PROV_CERT, its
// certificate): its workload's node gets config; a node of another
// namespace behind the same agent is refused with PermissionDenied, which
// the agent passes on.
func TestXDSIdentityIstioAgent(t *testing.T) {
	bin := agentBinary(t)
	s := startIdentityServe(t)
	tlsAddr := fmt.Sprintf("localhost:%d", s.grpcTLSAddr.(*net.TCPAddr).Port)

	t.Run("group", func(t *testing.T) {
		t.Run("token", func(t *testing.T) {
			t.Parallel()
			a := runAgent(t, bin, tlsAddr, tlsAddr, "shop", "ratings", s.iss.token(t, "shop", "ratings", "istio-ca", time.Hour),
				"CA_ROOT_CA="+s.root, "XDS_ROOT_CA="+s.root, agentProxyConfig(t, tlsAddr))
			checkAgentXDS(t, a, "ratings")
		})
		t.Run("client-certificate", func(t *testing.T) {
			t.Parallel()
			// A VM-style workload: PROV_CERT holds a certificate of the
			// mesh (the agent presents it to the xDS port too); its
			// token is worthless.
			prov := filepath.Join(t.TempDir(), "prov")
			issueFiles(t, s.grpcAddr.String(), s.iss.token(t, "shop", "details", "istio-ca", time.Hour), prov)
			a := runAgent(t, bin, tlsAddr, tlsAddr, "shop", "details", "not-a-token",
				"PROV_CERT="+prov, "CA_ROOT_CA="+s.root, "XDS_ROOT_CA="+s.root, agentProxyConfig(t, tlsAddr))
			checkAgentXDS(t, a, "details")
		})
	})
}

// agentProxyConfig is istio-agent's PROXY_CONFIG for xDS over TLS to addr,
// as in a cluster (it replaces runAgent's plaintext one).
func agentProxyConfig(t *testing.T, addr string) string {
	b, err := json.Marshal(map[string]any{
		"discoveryAddress": addr, "controlPlaneAuthPolicy": "MUTUAL_TLS", "statusPort": freePort(t), "proxyAdminPort": freePort(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return "PROXY_CONFIG=" + string(b)
}

// checkAgentXDS connects to the agent's xDS socket as its Envoy would, as
// shop/sa (served) and as a billing node (refused).
func checkAgentXDS(t *testing.T, a *agentRun, sa string) {
	t.Helper()
	sock := filepath.Join(a.dir, "etc", "istio", "proxy", "XDS")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("istio-agent did not open its xDS socket %s", sock)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	r, err := cdsOnce(t, cc, xdsNode(t, sa+"-0", "shop", "shop", sa), "")
	if err != nil || len(r.GetResources()) == 0 {
		t.Fatalf("through istio-agent as shop/%s: %v, %d clusters; want served", sa, err, len(r.GetResources()))
	}
	_, err = cdsOnce(t, cc, xdsNode(t, "billing-0", "billing", "billing", sa), "")
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("through istio-agent as a billing node: %v, want PermissionDenied", err)
	}
	t.Logf("billing node through istio-agent: %v", err)
}
