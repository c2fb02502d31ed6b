package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
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
	secure, err := newSecureServing(context.Background(), caOptions{}, slog.New(slog.DiscardHandler), nil, grpc.NewServer(), func(grpc.ServiceRegistrar) {})
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
