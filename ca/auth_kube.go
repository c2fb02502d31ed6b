package ca

import (
	"context"
	"fmt"
	"slices"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// DefaultTokenAudience is the audience istio-agent requests its token for
// and istiod checks (TOKEN_AUDIENCES).
const DefaultTokenAudience = "istio-ca"

// tokenReviewTimeout bounds one TokenReview call.
const tokenReviewTimeout = 10 * time.Second

// KubeAuthenticator accepts Kubernetes service account tokens, checked by
// the API server's TokenReview API with the configured audiences, as
// istiod's KubeJWTAuthenticator does. The reviewed user must be
// system:serviceaccount:NAMESPACE:NAME in group system:serviceaccounts,
// and the review must confirm one of the audiences.
type KubeAuthenticator struct {
	reviews   authv1client.TokenReviewInterface
	audiences []string
}

// NewKubeAuthenticator returns an authenticator calling reviews (from a
// client-go clientset: cs.AuthenticationV1().TokenReviews()). audiences
// defaults to [istio-ca].
func NewKubeAuthenticator(reviews authv1client.TokenReviewInterface, audiences []string) *KubeAuthenticator {
	if len(audiences) == 0 {
		audiences = []string{DefaultTokenAudience}
	}
	return &KubeAuthenticator{reviews: reviews, audiences: slices.Clone(audiences)}
}

// Name implements Authenticator.
func (*KubeAuthenticator) Name() string { return "kubernetes token" }

// Authenticate implements Authenticator.
func (k *KubeAuthenticator) Authenticate(ctx context.Context, c Credentials) (Caller, error) {
	if c.BearerToken == "" {
		return Caller{}, ErrNoCredential
	}
	ctx, cancel := context.WithTimeout(ctx, tokenReviewTimeout)
	defer cancel()
	review, err := k.reviews.Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: c.BearerToken, Audiences: k.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return Caller{}, fmt.Errorf("token review failed: %v", err)
	}
	st := review.Status
	switch {
	case st.Error != "":
		return Caller{}, fmt.Errorf("token review: %s", st.Error)
	case !st.Authenticated:
		return Caller{}, fmt.Errorf("token not authenticated")
	case !audiencesIntersect(st.Audiences, k.audiences):
		return Caller{}, fmt.Errorf("token review confirmed audiences %q, want one of %q", st.Audiences, k.audiences)
	case !slices.Contains(st.User.Groups, "system:serviceaccounts"):
		return Caller{}, fmt.Errorf("user %q is not a service account", st.User.Username)
	}
	return parseServiceAccountUser(st.User.Username)
}
