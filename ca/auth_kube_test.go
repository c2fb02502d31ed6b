package ca_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// fakeTokenReviewAPI is an httptest server answering the TokenReview API
// (POST /apis/authentication.k8s.io/v1/tokenreviews) from a table of
// tokens. It fakes the API server for this unit test only: no real
// kube-apiserver runs in this package's tests. The end-to-end check with a
// real API server and a real service account token (TokenRequest) belongs
// to the Kubernetes issue, which brings kube-apiserver into the tests
// (notes: kubernetes-tests.md).
type fakeTokenReviewAPI struct {
	statuses map[string]authv1.TokenReviewStatus
	calls    atomic.Int32
	lastAuds atomic.Value // []string
}

func (f *fakeTokenReviewAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" {
		http.NotFound(w, r)
		return
	}
	f.calls.Add(1)
	var tr authv1.TokenReview
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		http.Error(w, "this fake speaks JSON only, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.lastAuds.Store(tr.Spec.Audiences)
	if tr.Spec.Token == "500" {
		http.Error(w, "etcd is on fire", http.StatusInternalServerError)
		return
	}
	tr.Status = f.statuses[tr.Spec.Token]
	tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(&tr)
}

func TestKubeAuthenticator(t *testing.T) {
	sa := func(user string, aud ...string) authv1.TokenReviewStatus {
		return authv1.TokenReviewStatus{Authenticated: true, Audiences: aud,
			User: authv1.UserInfo{Username: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"}}}
	}
	notSA := sa("alice", "istio-ca")
	notSA.User.Groups = []string{"system:authenticated"}
	fake := &fakeTokenReviewAPI{statuses: map[string]authv1.TokenReviewStatus{
		"good":         sa("system:serviceaccount:shop:reviews", "istio-ca"),
		"wrong-aud":    sa("system:serviceaccount:shop:reviews", "kubernetes"),
		"no-aud":       sa("system:serviceaccount:shop:reviews"),
		"not-sa":       notSA,
		"bad-user":     sa("system:serviceaccount:shop", "istio-ca"),
		"rejected":     {Authenticated: false},
		"review-error": {Error: "token expired"},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	// JSON: the fake decodes no protobuf (a real API server takes both).
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		ContentType: "application/json", AcceptContentTypes: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	a := ca.NewKubeAuthenticator(cs.AuthenticationV1().TokenReviews(), nil)

	for _, tc := range []struct {
		token, why string
	}{
		{"good", ""},
		{"wrong-aud", "audiences"},
		{"no-aud", "audiences"},
		{"not-sa", "not a service account"},
		{"bad-user", "system:serviceaccount:NAMESPACE:NAME"},
		{"rejected", "not authenticated"},
		{"review-error", "token expired"},
		{"500", "token review failed"},
		{"unknown", "not authenticated"},
	} {
		t.Run(tc.token, func(t *testing.T) {
			c, err := a.Authenticate(context.Background(), ca.Credentials{BearerToken: tc.token})
			if tc.why == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Namespace != "shop" || c.ServiceAccount != "reviews" {
					t.Fatalf("caller %+v", c)
				}
				if auds := fake.lastAuds.Load().([]string); len(auds) != 1 || auds[0] != "istio-ca" {
					t.Errorf("review asked for audiences %q, want [istio-ca]", auds)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("err %v, want one saying %q", err, tc.why)
			}
		})
	}
	before := fake.calls.Load()
	if _, err := a.Authenticate(context.Background(), ca.Credentials{}); err == nil {
		t.Fatal("no token accepted")
	}
	if fake.calls.Load() != before {
		t.Error("a review was sent without a token")
	}
}
