package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	networkingv1 "istio.io/api/networking/v1"
	istionet "istio.io/client-go/pkg/apis/networking/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestWebhookCABundleDuty applies deploy/manifests to a real API server
// and runs the leader's caBundle duty with the pilotfish service account's
// own token (so the chart's RBAC is proven sufficient): the webhook
// configuration gets the CA's roots, and new ones after a root change.
func TestWebhookCABundleDuty(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	c.EnsureNamespace(t, "istio-system")
	if out, err := c.Kubectl(t, "apply", "-f", "../../deploy/manifests/pilotfish.yaml"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	token := c.ServiceAccountToken(t, "istio-system", "pilotfish", nil)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: c.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}})
	if err != nil {
		t.Fatal(err)
	}
	secure, err := newSecureServing(context.Background(), caOptions{}, slog.New(slog.DiscardHandler), nil, grpc.NewServer(), func(grpc.ServiceRegistrar, serve.AuthOptions) {})
	if err != nil {
		t.Fatal(err)
	}
	const name = "pilotfish-validator-istio-system"
	l := newLeader(client, leaderOptions{namespace: "istio-system", lease: "pilotfish-leader",
		leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: 200 * time.Millisecond},
		"pilotfish-0", slog.New(slog.DiscardHandler))
	l.AddDuty(webhookCABundle(client, name, secure.authority, slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	bundleIs := func(want []byte) func() string {
		return func() string {
			cfg, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			for _, w := range cfg.Webhooks {
				if !bytes.Equal(w.ClientConfig.CABundle, want) {
					return "caBundle of " + w.Name + ": " + strings.SplitN(string(w.ClientConfig.CABundle), "\n", 2)[0]
				}
			}
			return ""
		}
	}
	eventuallyFor(t, time.Minute, "caBundle set", bundleIs(secure.authority.Bundle().RootsPEM()))

	m, err := ca.NewRoot(ca.SelfSignedOptions{Org: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.NewBundle(m)
	if err != nil {
		t.Fatal(err)
	}
	secure.authority.SetBundle(b)
	eventuallyFor(t, time.Minute, "caBundle follows the new root", bundleIs(b.RootsPEM()))
}

// TestServeLeaderCABundle runs `pilotfish serve --kubeconfig` with the
// webhook and --webhook-config-name: the elected server writes its CA's
// roots into the configuration, and the API server then calls the webhook
// (a bad VirtualService is refused).
func TestServeLeaderCABundle(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const name = "pilotfish-validator"
	url := "https://127.0.0.1:1/validate" // replaced once serve listens
	fail, none := admissionregv1.Fail, admissionregv1.SideEffectClassNone
	cfg := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name: "validation.istio.io", ClientConfig: admissionregv1.WebhookClientConfig{URL: &url},
			Rules: istioWebhookRules(), FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rootsFile := filepath.Join(t.TempDir(), "root-cert.pem")
	o := &serveOptions{grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 10, shutdownGrace: time.Second,
		webhook: webhookOptions{addr: "127.0.0.1:0", configName: name},
		ca:      caOptions{tlsSANs: []string{"127.0.0.1"}, rootCertOut: rootsFile},
		kube:    kubeOptions{kubeconfig: c.Kubeconfig},
		leader: leaderOptions{namespace: "default", lease: "pilotfish-leader",
			leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: 200 * time.Millisecond}}
	sctx, scancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	go func() { done <- runServe(sctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() { scancel(); <-done })
	roots, err := os.ReadFile(rootsFile)
	if err != nil {
		t.Fatal(err)
	}
	eventuallyFor(t, time.Minute, "caBundle written by the leader", func() string {
		got, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, roots) {
			return "caBundle not the CA's roots yet"
		}
		// Point the webhook at the server, keeping the bundle.
		u := "https://" + s.webhookAddr.String() + "/validate"
		got.Webhooks[0].ClientConfig.URL = &u
		if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			return err.Error()
		}
		return ""
	})
	c.EnsureNamespace(t, "shop")
	bad := &istionet.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop"},
		Spec: networkingv1.VirtualService{Hosts: []string{"reviews"}, Http: []*networkingv1.HTTPRoute{{
			Route: []*networkingv1.HTTPRouteDestination{{Destination: &networkingv1.Destination{Host: "reviews", Subset: "Not_A_Label"}}},
		}}},
	}
	eventuallyFor(t, 30*time.Second, "bad VirtualService refused", func() string {
		_, err := c.Istio.NetworkingV1().VirtualServices("shop").Create(ctx, bad, metav1.CreateOptions{})
		if err == nil {
			_ = c.Istio.NetworkingV1().VirtualServices("shop").Delete(ctx, "reviews", metav1.DeleteOptions{})
			return "admitted"
		}
		if !strings.Contains(err.Error(), "destination.subset") {
			return err.Error()
		}
		return ""
	})
}
