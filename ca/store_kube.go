package ca

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Key names and type of istiod's self-signed CA Secret (istio/istio
// security/pkg/pki/ca): a pilotfish replacing istiod in a cluster keeps the
// root istiod generated, and the reverse.
const (
	SecretName      = "istio-ca-secret"
	SecretType      = "istio.io/ca-root"
	secretCertKey   = "ca-cert.pem"
	secretKeyKey    = "ca-key.pem"
	secretChainKey  = "cert-chain.pem"
	secretRootsKey  = "root-cert.pem"
	secretStoreNote = "self-signed CA root of the mesh; the key never leaves this Secret"
)

// KubeStore keeps a self-signed CA in Secret istio-ca-secret. Replicas
// starting together race to create it; the API server lets one Create win
// and Save returns ErrStoreConflict to the others, which then load the
// winner's root (LoadOrCreateRoot), so every replica signs under one root.
// Updates carry the resourceVersion last seen, so a rotation never
// overwrites another replica's newer root either.
type KubeStore struct {
	Secrets   corev1client.SecretsGetter
	Namespace string

	mu              sync.Mutex
	resourceVersion string // guarded by mu; "" until the Secret is seen
}

// Load implements Store.
func (s *KubeStore) Load(ctx context.Context) (Material, error) {
	sec, err := s.Secrets.Secrets(s.Namespace).Get(ctx, SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Material{}, fmt.Errorf("%w: Secret %s/%s", ErrNotFound, s.Namespace, SecretName)
	}
	if err != nil {
		return Material{}, fmt.Errorf("ca: reading Secret %s/%s: %w", s.Namespace, SecretName, err)
	}
	s.mu.Lock()
	s.resourceVersion = sec.ResourceVersion
	s.mu.Unlock()
	m := Material{
		CertPEM: sec.Data[secretCertKey], KeyPEM: sec.Data[secretKeyKey],
		ChainPEM: sec.Data[secretChainKey], RootsPEM: sec.Data[secretRootsKey],
	}
	if len(m.CertPEM) == 0 || len(m.KeyPEM) == 0 {
		return Material{}, fmt.Errorf("%w: Secret %s/%s: want %s and %s", ErrInvalidBundle, s.Namespace, SecretName, secretCertKey, secretKeyKey)
	}
	if len(m.RootsPEM) == 0 {
		m.RootsPEM = m.CertPEM // istiod's older Secrets may omit root-cert.pem
	}
	return m, nil
}

// Save implements Store: Create when no Secret was seen, else Update at the
// resourceVersion last seen. Losing either race returns ErrStoreConflict.
func (s *KubeStore) Save(ctx context.Context, m Material) error {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: s.Namespace,
			Annotations: map[string]string{"pilotfish.io/note": secretStoreNote}},
		Type: SecretType,
		Data: map[string][]byte{
			secretCertKey: m.CertPEM, secretKeyKey: m.KeyPEM,
			secretChainKey: m.ChainPEM, secretRootsKey: m.RootsPEM,
		},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	api := s.Secrets.Secrets(s.Namespace)
	var (
		got *corev1.Secret
		err error
	)
	if s.resourceVersion == "" {
		got, err = api.Create(ctx, sec, metav1.CreateOptions{})
	} else {
		sec.ResourceVersion = s.resourceVersion
		got, err = api.Update(ctx, sec, metav1.UpdateOptions{})
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		return fmt.Errorf("%w: Secret %s/%s: %v", ErrStoreConflict, s.Namespace, SecretName, err)
	}
	if err != nil {
		return fmt.Errorf("ca: writing Secret %s/%s: %w", s.Namespace, SecretName, err)
	}
	s.resourceVersion = got.ResourceVersion
	return nil
}
