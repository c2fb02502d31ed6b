package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestRootCertConfigMaps runs the leader's root-cert duty with the
// service account and RBAC of deploy/manifests against a real API server:
// istio-ca-root-cert holds the CA's roots in every namespace, a new
// namespace gets it, a changed or deleted one is restored, and a root
// change reaches every namespace.
func TestRootCertConfigMaps(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	c.EnsureNamespace(t, "istio-system")
	if out, err := c.Kubectl(t, "apply", "-f", "../../deploy/manifests/pilotfish.yaml"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	for _, ns := range []string{"shop", "bank"} {
		c.EnsureNamespace(t, ns)
	}
	token := c.ServiceAccountToken(t, "istio-system", "pilotfish", nil)
	secure, err := newSecureServing(context.Background(), caOptions{}, slog.New(slog.DiscardHandler), nil, grpc.NewServer(), func(grpc.ServiceRegistrar, serve.AuthOptions) {})
	if err != nil {
		t.Fatal(err)
	}
	l, err := newServeLeader(&rest.Config{Host: c.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}},
		leaderOptions{namespace: "istio-system", lease: "pilotfish-leader", rootCertConfigMaps: true,
			leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: 200 * time.Millisecond},
		webhookOptions{}, injectOptions{}, secure, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.start(ctx)
	t.Cleanup(func() { cancel(); l.wait() })

	cms := c.Client.CoreV1()
	everywhere := func(roots string, namespaces ...string) func() string {
		return func() string {
			for _, ns := range namespaces {
				cm, err := cms.ConfigMaps(ns).Get(context.Background(), "istio-ca-root-cert", metav1.GetOptions{})
				if err != nil {
					return ns + ": " + err.Error()
				}
				if cm.Data["root-cert.pem"] != roots {
					return ns + ": root-cert.pem is not the CA's roots"
				}
			}
			return ""
		}
	}
	roots := string(secure.authority.Bundle().RootsPEM())
	eventuallyFor(t, time.Minute, "every namespace", everywhere(roots, "default", "kube-system", "istio-system", "shop", "bank"))

	c.EnsureNamespace(t, "late")
	eventuallyFor(t, time.Minute, "a new namespace", everywhere(roots, "late"))

	cm, err := cms.ConfigMaps("shop").Get(context.Background(), "istio-ca-root-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["root-cert.pem"] = "tampered"
	if _, err := cms.ConfigMaps("shop").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.ConfigMaps("bank").Delete(context.Background(), "istio-ca-root-cert", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyFor(t, time.Minute, "changed and deleted ConfigMaps restored", everywhere(roots, "shop", "bank"))

	m, err := ca.NewRoot(ca.SelfSignedOptions{Org: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.NewBundle(m)
	if err != nil {
		t.Fatal(err)
	}
	secure.authority.SetBundle(b)
	eventuallyFor(t, time.Minute, "new roots everywhere", everywhere(string(b.RootsPEM()), "default", "kube-system", "istio-system", "shop", "bank", "late"))
}
