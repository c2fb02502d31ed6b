package kubetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	networkingv1 "istio.io/api/networking/v1"
	istionet "istio.io/client-go/pkg/apis/networking/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCluster starts a cluster with Istio's CRDs, writes a Service and a
// VirtualService, restarts the apiserver and reads both back, and checks a
// service-account token from the TokenRequest API against TokenReview.
func TestCluster(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}},
	}
	created, err := c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service: %v", err)
	}
	if created.Spec.ClusterIP == "" || !strings.HasPrefix(created.Spec.ClusterIP, "10.96.") {
		t.Fatalf("Service got cluster IP %q, want one in 10.96.0.0/16", created.Spec.ClusterIP)
	}
	vs := &istionet.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "default"},
		Spec: networkingv1.VirtualService{
			Hosts: []string{"reviews"},
			Http: []*networkingv1.HTTPRoute{{Route: []*networkingv1.HTTPRouteDestination{{
				Destination: &networkingv1.Destination{Host: "reviews"},
			}}}},
		},
	}
	if _, err := c.Istio.NetworkingV1().VirtualServices("default").Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create VirtualService: %v", err)
	}

	c.RestartAPIServer(t)

	got, err := c.Client.CoreV1().Services("default").Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Service after restart: %v", err)
	}
	if got.UID != created.UID || got.Spec.ClusterIP != created.Spec.ClusterIP {
		t.Fatalf("Service after restart: uid %s ip %s, want %s %s", got.UID, got.Spec.ClusterIP, created.UID, created.Spec.ClusterIP)
	}
	gotVS, err := c.Istio.NetworkingV1().VirtualServices("default").Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("VirtualService after restart: %v", err)
	}
	if h := gotVS.Spec.GetHosts(); len(h) != 1 || h[0] != "reviews" {
		t.Fatalf("VirtualService after restart: hosts %v", h)
	}

	token := c.ServiceAccountToken(t, "bookinfo", "reviews", []string{"istio-ca"})
	review, err := c.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{"istio-ca"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:bookinfo:reviews" {
		t.Fatalf("TokenReview: authenticated %v user %q error %q", review.Status.Authenticated, review.Status.User.Username, review.Status.Error)
	}
	// A token for another audience is refused for istio-ca.
	other := c.ServiceAccountToken(t, "bookinfo", "reviews", nil)
	review, err = c.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: other, Audiences: []string{"istio-ca"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	if review.Status.Authenticated {
		t.Fatal("TokenReview accepted a token of the issuer's audience for istio-ca")
	}

	out, err := c.Kubectl(t, "get", "virtualservices.networking.istio.io", "-n", "default", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "virtualservice.networking.istio.io/reviews" {
		t.Fatalf("kubectl get virtualservices: %v\n%s", err, out)
	}
}
