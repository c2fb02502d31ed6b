package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestCAIstioAgentKubeToken: the real istio-agent gets and rotates its
// certificate with a real service account token (TokenRequest, audience
// istio-ca) that pilotfish verifies with TokenReview against the same API
// server, over 15010 and over 15012 (CA_ROOT_CA). With the API server
// configured and no cacerts, the root is the one kept in istio-ca-secret.
func TestCAIstioAgentKubeToken(t *testing.T) {
	bin := agentBinary(t)
	c := kubetest.Start(t, kubetest.Options{})
	c.EnsureNamespace(t, "istio-system") // POD_NAMESPACE's default: istio-ca-secret
	root := filepath.Join(t.TempDir(), "root-cert.pem")
	s := startCAServe(t, caOptions{tlsAddr: "127.0.0.1:0", rootCertOut: root, kubeconfig: c.Kubeconfig,
		trustDomain: "cluster.local", tokenAudiences: []string{"istio-ca"}})
	plainCA := forward15010(t, s.grpcAddr.String())
	tlsPort := s.grpcTLSAddr.(*net.TCPAddr).Port

	sec, err := c.Client.CoreV1().Secrets("istio-system").Get(context.Background(), ca.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the self-signed root is not in Secret istio-system/%s: %v", ca.SecretName, err)
	}
	rootFile, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(sec.Data["root-cert.pem"]), bytes.TrimSpace(rootFile)) {
		t.Fatal("the CA does not serve the root kept in istio-ca-secret")
	}

	// A second replica (or a restart) signs under the same root.
	root2 := filepath.Join(t.TempDir(), "root-cert.pem")
	startCAServe(t, caOptions{rootCertOut: root2, kubeconfig: c.Kubeconfig, trustDomain: "cluster.local", tokenAudiences: []string{"istio-ca"}})
	if rootFile2, err := os.ReadFile(root2); err != nil || !bytes.Equal(rootFile, rootFile2) {
		t.Fatalf("a second pilotfish on the same API server has another root (%v)", err)
	}

	t.Run("group", func(t *testing.T) {
		t.Run("plaintext-15010", func(t *testing.T) {
			t.Parallel()
			a := runAgent(t, bin, plainCA, s.grpcAddr.String(), "shop", "reviews",
				c.ServiceAccountToken(t, "shop", "reviews", []string{"istio-ca"}))
			a.waitRotation(t, "spiffe://cluster.local/ns/shop/sa/reviews")
		})
		t.Run("tls-15012", func(t *testing.T) {
			t.Parallel()
			a := runAgent(t, bin, fmt.Sprintf("localhost:%d", tlsPort), s.grpcAddr.String(), "shop", "ratings",
				c.ServiceAccountToken(t, "shop", "ratings", []string{"istio-ca"}), "CA_ROOT_CA="+root)
			a.waitRotation(t, "spiffe://cluster.local/ns/shop/sa/ratings")
			if !strings.Contains(a.log.String(), "cert with certs: "+root) {
				t.Error("istio-agent did not use TLS with CA_ROOT_CA")
			}
		})
	})

	// Negatives, as a raw CreateCertificate call over 15010 so the refusal
	// and its status code are seen directly.
	const reviewsID = "spiffe://cluster.local/ns/shop/sa/reviews"
	for _, tc := range []struct {
		name, token string
		want        codes.Code
	}{
		{"right token", c.ServiceAccountToken(t, "shop", "reviews", []string{"istio-ca"}), codes.OK},
		{"wrong audience", c.ServiceAccountToken(t, "shop", "reviews", []string{"not-istio-ca"}), codes.Unauthenticated},
		{"other service account", c.ServiceAccountToken(t, "shop", "intruder", []string{"istio-ca"}), codes.PermissionDenied},
		{"other namespace", c.ServiceAccountToken(t, "other", "reviews", []string{"istio-ca"}), codes.PermissionDenied},
		{"not a token", "garbage", codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := createCertFor(t, s.grpcAddr.String(), tc.token, reviewsID)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("CreateCertificate for %s: %v, want %s", reviewsID, err, tc.want)
			}
		})
	}
}

// createCertFor asks the CA at addr for a certificate naming id, with
// token as the caller's credential.
func createCertFor(t *testing.T, addr, token, id string) error {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	_, err = pb.NewIstioCertificateServiceClient(cc).CreateCertificate(ctx, &pb.IstioCertificateRequest{
		Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), ValidityDuration: 600,
	})
	return err
}
