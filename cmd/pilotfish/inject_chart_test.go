package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestInjectorWithChart applies deploy/manifests to a real API server and
// runs the injector's ConfigMap watch and the leader's injection-webhook
// duty with the pilotfish service account's own token (so the chart's
// RBAC is proven sufficient): the injector comes up from the chart's
// istio-sidecar-injector ConfigMap and injects with the chart's image,
// and the chart's MutatingWebhookConfiguration gets the CA's roots in
// every webhook.
func TestInjectorWithChart(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	st := newInjectState(injectOptions{configMaps: true, namespace: "istio-system"}, nil, log)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { watchInjectConfigMaps(wctx, client, st); close(done) }()
	defer func() { stop(); <-done }()
	eventuallyFor(t, time.Minute, "injector from the chart's ConfigMap", func() string {
		in := st.injector()
		if in == nil {
			return "no injector"
		}
		res, err := in.Inject(inject.Request{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}})
		if err != nil || !res.Injected || len(res.Pod.Spec.Containers) != 2 {
			return "not injected"
		}
		if img := res.Pod.Spec.Containers[1].Image; !strings.HasPrefix(img, "docker.io/istio/proxyv2:") {
			return "image " + img
		}
		return ""
	})

	secure, err := newSecureServing(ctx, caOptions{}, log, nil, grpc.NewServer(), func(grpc.ServiceRegistrar, serve.AuthOptions) {})
	if err != nil {
		t.Fatal(err)
	}
	l := newLeader(client, leaderOptions{namespace: "istio-system", lease: "pilotfish-leader",
		leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: 200 * time.Millisecond}, "pilotfish-0", log)
	l.AddDuty(injectWebhookCABundle(client, "", secure.authority, log))
	lctx, lcancel := context.WithCancel(ctx)
	ldone := make(chan struct{})
	go func() { l.Run(lctx); close(ldone) }()
	defer func() { lcancel(); <-ldone }()
	roots := secure.authority.Bundle().RootsPEM()
	eventuallyFor(t, time.Minute, "the chart's injection webhooks trust the CA", func() string {
		cfg, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(cfg.Webhooks) != 4 {
			return "webhooks: " + cfg.Name
		}
		for _, w := range cfg.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, roots) {
				return w.Name + " lacks the roots"
			}
		}
		return ""
	})
}
