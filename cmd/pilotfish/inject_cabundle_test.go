package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestInjectWebhookCABundleDuty runs the leader's injection-webhook duty
// against a real API server: the sidecar-injector webhooks of the
// MutatingWebhookConfigurations of its revision (istio-sidecar-injector
// and a revision tag, also one created later) get the CA's roots, and the
// new ones after a root change; a webhook of another name in the same
// configuration, and the configurations of another revision or without
// the label, are left alone.
func TestInjectWebhookCABundleDuty(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	secure, err := newSecureServing(ctx, caOptions{}, slog.New(slog.DiscardHandler), nil, grpc.NewServer(), func(grpc.ServiceRegistrar, serve.AuthOptions) {})
	if err != nil {
		t.Fatal(err)
	}
	api := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	url := "https://127.0.0.1:1/inject"
	none := admissionregv1.SideEffectClassNone
	create := func(name string, labels map[string]string, hooks ...string) {
		cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		for _, h := range hooks {
			cfg.Webhooks = append(cfg.Webhooks, admissionregv1.MutatingWebhook{Name: h, SideEffects: &none,
				AdmissionReviewVersions: []string{"v1"}, ClientConfig: admissionregv1.WebhookClientConfig{URL: &url, CABundle: []byte("old")}})
		}
		if _, err := api.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("istio-sidecar-injector", map[string]string{"istio.io/rev": "default"},
		"rev.namespace.sidecar-injector.istio.io", "rev.object.sidecar-injector.istio.io", "audit.example.com")
	create("istio-revision-tag-prod", map[string]string{"istio.io/rev": "default", "istio.io/tag": "prod"}, "rev.namespace.sidecar-injector.istio.io")
	create("istio-sidecar-injector-canary", map[string]string{"istio.io/rev": "canary"}, "rev.namespace.sidecar-injector.istio.io")
	create("unlabelled", nil, "namespace.sidecar-injector.istio.io")

	l := newLeader(c.Client, leaderOptions{namespace: "default", lease: "pilotfish-leader",
		leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: 200 * time.Millisecond},
		"pilotfish-0", slog.New(slog.DiscardHandler))
	l.AddDuty(injectWebhookCABundle(c.Client, "", secure.authority, slog.New(slog.DiscardHandler)))
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(lctx); close(done) }()
	defer func() { lcancel(); <-done }()

	// bundles: every webhook's caBundle, by configuration and webhook.
	bundles := func() map[string][]byte {
		list, err := api.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, cfg := range list.Items {
			for _, w := range cfg.Webhooks {
				out[cfg.Name+"/"+w.Name] = w.ClientConfig.CABundle
			}
		}
		return out
	}
	owned := []string{"istio-sidecar-injector/rev.namespace.sidecar-injector.istio.io",
		"istio-sidecar-injector/rev.object.sidecar-injector.istio.io", "istio-revision-tag-prod/rev.namespace.sidecar-injector.istio.io"}
	untouched := []string{"istio-sidecar-injector/audit.example.com", "istio-sidecar-injector-canary/rev.namespace.sidecar-injector.istio.io",
		"unlabelled/namespace.sidecar-injector.istio.io"}
	check := func(roots []byte, owned ...string) func() string {
		return func() string {
			b := bundles()
			for _, k := range owned {
				if !bytes.Equal(b[k], roots) {
					return k + " has caBundle " + string(b[k][:min(len(b[k]), 40)])
				}
			}
			for _, k := range untouched {
				if string(b[k]) != "old" {
					return k + " was changed"
				}
			}
			return ""
		}
	}
	eventuallyFor(t, time.Minute, "caBundle set", check(secure.authority.Bundle().RootsPEM(), owned...))

	create("istio-revision-tag-late", map[string]string{"istio.io/rev": "default", "istio.io/tag": "late"}, "rev.object.sidecar-injector.istio.io")
	owned = append(owned, "istio-revision-tag-late/rev.object.sidecar-injector.istio.io")
	eventuallyFor(t, time.Minute, "a new tag's caBundle set", check(secure.authority.Bundle().RootsPEM(), owned...))

	m, err := ca.NewRoot(ca.SelfSignedOptions{Org: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.NewBundle(m)
	if err != nil {
		t.Fatal(err)
	}
	secure.authority.SetBundle(b)
	eventuallyFor(t, time.Minute, "caBundle follows the new root", check(b.RootsPEM(), owned...))
}
