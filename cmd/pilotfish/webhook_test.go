package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1 "istio.io/api/networking/v1"
	istionet "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// startWebhook runs `pilotfish serve` with the webhook on a random port and
// returns the webhook's address and the PEM roots that sign its certificate
// (written by --root-cert-out).
func startWebhook(t *testing.T, wo webhookOptions) (addr string, roots []byte) {
	t.Helper()
	dir := t.TempDir()
	rootsFile := filepath.Join(dir, "root-cert.pem")
	wo.addr = "127.0.0.1:0"
	o := &serveOptions{configDir: t.TempDir(), grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 10, resync: 200 * time.Millisecond, shutdownGrace: time.Second, webhook: wo,
		ca: caOptions{tlsSANs: []string{"127.0.0.1"}, rootCertOut: rootsFile}}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve shutdown: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not shut down")
		}
	})
	if s.webhookAddr == nil {
		t.Fatal("webhook is off")
	}
	roots, err := os.ReadFile(rootsFile)
	if err != nil {
		t.Fatal(err)
	}
	return s.webhookAddr.String(), roots
}

// postReview posts an AdmissionReview over TLS verified against roots.
func postReview(t *testing.T, addr string, roots []byte, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(roots) {
		t.Fatalf("no roots in %q", roots)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Post("https://"+addr+"/validate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("webhook: %v", err)
	}
	defer resp.Body.Close()
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Response == nil {
		t.Fatalf("webhook answered %d: %v", resp.StatusCode, err)
	}
	return review.Response
}

const badSubsetVS = `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"reviews","namespace":"shop"},
"spec":{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"reviews","subset":"Not_A_Label"}}]}]}}`

// TestWebhookServesWithCACertificate checks the webhook's TLS certificate
// from pilotfish's CA (valid for --tls-san 127.0.0.1, chaining to the root
// of --root-cert-out) and its answer to a bad VirtualService.
func TestWebhookServesWithCACertificate(t *testing.T) {
	addr, roots := startWebhook(t, webhookOptions{})
	body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","operation":"CREATE",
"kind":{"group":"networking.istio.io","version":"v1","kind":"VirtualService"},"namespace":"shop","name":"reviews","object":` + badSubsetVS + `}}`)
	resp := postReview(t, addr, roots, body)
	want := `VirtualService shop/reviews: spec.http[0].route[0].destination.subset: invalid subset name "Not_A_Label"`
	if resp.UID != "u-1" || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, want) {
		t.Fatalf("response %+v, want a denial naming %q", resp, want)
	}
}

// TestWebhookCertFiles checks --webhook-cert/--webhook-key: the files'
// certificate is served, and a rewrite of the files is picked up.
func TestWebhookCertFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	pki := newTestPKI(t)
	pki.issue(t, certFile, keyFile, "first")
	addr, _ := startWebhook(t, webhookOptions{certFile: certFile, keyFile: keyFile})
	serial := func() string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool(), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("TLS: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := serial(); got != "first" {
		t.Fatalf("served %q, want the first certificate", got)
	}
	time.Sleep(10 * time.Millisecond) // a distinct modification time
	pki.issue(t, certFile, keyFile, "second")
	eventually(t, "rotated certificate", func() string {
		if got := serial(); got != "second" {
			return "serving " + got
		}
		return ""
	})
}

// TestWebhookWithAPIServer registers the webhook with a real kube-apiserver
// (a URL clientConfig with pilotfish's root as caBundle): a VirtualService
// pilotfish rejects is refused with the field named, a good one admitted.
func TestWebhookWithAPIServer(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	registerWebhook(ctx, t, c)
	c.EnsureNamespace(t, "shop")
	bad := &istionet.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop"},
		Spec: networkingv1.VirtualService{Hosts: []string{"reviews"}, Http: []*networkingv1.HTTPRoute{{
			Route: []*networkingv1.HTTPRouteDestination{{Destination: &networkingv1.Destination{Host: "reviews", Subset: "Not_A_Label"}}},
		}}},
	}
	// The apiserver reads webhook configurations through an informer: retry
	// until the webhook is in force (a create admitted meanwhile is deleted).
	want := `admission webhook "validation.istio.io" denied the request: configuration is invalid: VirtualService shop/reviews: spec.http[0].route[0].destination.subset: invalid subset name "Not_A_Label"`
	eventuallyFor(t, 30*time.Second, "bad VirtualService refused", func() string {
		_, err := c.Istio.NetworkingV1().VirtualServices("shop").Create(ctx, bad, metav1.CreateOptions{})
		if err == nil {
			_ = c.Istio.NetworkingV1().VirtualServices("shop").Delete(ctx, "reviews", metav1.DeleteOptions{})
			return "admitted"
		}
		if !strings.Contains(err.Error(), want) {
			return err.Error()
		}
		return ""
	})
	good := bad.DeepCopy()
	good.Spec.Http[0].Route[0].Destination.Subset = "v1"
	if _, err := c.Istio.NetworkingV1().VirtualServices("shop").Create(ctx, good, metav1.CreateOptions{}); err != nil {
		t.Fatalf("good VirtualService refused: %v", err)
	}
	// An update is reviewed too.
	got, err := c.Istio.NetworkingV1().VirtualServices("shop").Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Http[0].Route[0].Destination.Subset = "Not_A_Label"
	if _, err := c.Istio.NetworkingV1().VirtualServices("shop").Update(ctx, got, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "destination.subset") {
		t.Fatalf("bad update: %v, want a denial naming destination.subset", err)
	}
}

// registerWebhook starts pilotfish's webhook and registers it with the API
// server as istiod's validating webhook is (a URL clientConfig with
// pilotfish's root as caBundle). The API server starts using it a moment
// later: callers retry their first request.
func registerWebhook(ctx context.Context, t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	addr, roots := startWebhook(t, webhookOptions{})
	url := "https://" + addr + "/validate"
	fail, none := admissionregv1.Fail, admissionregv1.SideEffectClassNone
	cfg := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "pilotfish-validator"},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:                    "validation.istio.io",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: roots},
			Rules:                   istioWebhookRules(),
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// istioWebhookRules are the rules of istiod's validating webhook: every
// Istio config kind pilotfish reads, CREATE and UPDATE.
func istioWebhookRules() []admissionregv1.RuleWithOperations {
	return []admissionregv1.RuleWithOperations{{
		Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
		Rule: admissionregv1.Rule{
			APIGroups:   []string{"networking.istio.io", "security.istio.io"},
			APIVersions: []string{"*"},
			Resources:   []string{"*"},
		},
	}}
}

func eventuallyFor(t *testing.T, d time.Duration, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		if last = check(); last == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %s", what, last)
}

// testPKI is a CA outside pilotfish (as cert-manager would be) issuing the
// webhook's certificate files.
type testPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{cert: cert, key: key}
}

func (p *testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.cert)
	return pool
}

// issue writes a serving certificate for 127.0.0.1 named cn and its key.
func (p *testPKI) issue(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Key first: a reader between the writes sees a mismatched pair and
	// keeps the last good one.
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
