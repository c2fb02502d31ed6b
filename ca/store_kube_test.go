package ca_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestKubeStore runs the istio-ca-secret store against a real API server.
func TestKubeStore(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	namespace := func(t *testing.T, name string) string {
		t.Helper()
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	opts := ca.SelfSignedOptions{Org: "cluster.local"}

	t.Run("restart reuses the root", func(t *testing.T) {
		ns := namespace(t, "restart")
		b1, err := ca.LoadOrCreateRoot(ctx, &ca.KubeStore{Secrets: c.Client.CoreV1(), Namespace: ns}, opts)
		if err != nil {
			t.Fatal(err)
		}
		sec, err := c.Client.CoreV1().Secrets(ns).Get(ctx, ca.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sec.Type != ca.SecretType || !bytes.Equal(sec.Data["ca-cert.pem"], b1.Material().CertPEM) ||
			!bytes.Equal(sec.Data["ca-key.pem"], b1.Material().KeyPEM) || !bytes.Equal(sec.Data["root-cert.pem"], b1.RootsPEM()) {
			t.Fatalf("Secret type %q keys %v does not hold the root in istiod's layout", sec.Type, keys(sec.Data))
		}
		// A new process: a new store instance with no state.
		b2, err := ca.LoadOrCreateRoot(ctx, &ca.KubeStore{Secrets: c.Client.CoreV1(), Namespace: ns}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1.Material().CertPEM, b2.Material().CertPEM) || !bytes.Equal(b1.Material().KeyPEM, b2.Material().KeyPEM) {
			t.Fatal("restart generated a new root instead of loading the stored one")
		}
	})

	t.Run("concurrent starts agree on one root", func(t *testing.T) {
		for round := range 3 {
			ns := namespace(t, fmt.Sprintf("race-%d", round))
			const replicas = 3
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				roots [replicas][]byte
				errs  [replicas]error
			)
			for i := range replicas {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := &ca.KubeStore{Secrets: c.Client.CoreV1(), Namespace: ns}
					<-start
					b, err := ca.LoadOrCreateRoot(ctx, s, opts)
					if err == nil {
						roots[i] = b.Material().CertPEM
					}
					errs[i] = err
				}()
			}
			close(start)
			wg.Wait()
			sec, err := c.Client.CoreV1().Secrets(ns).Get(ctx, ca.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range replicas {
				if errs[i] != nil {
					t.Fatalf("replica %d: %v", i, errs[i])
				}
				if !bytes.Equal(roots[i], sec.Data["ca-cert.pem"]) {
					t.Fatalf("round %d: replica %d signs under a root other than the stored one", round, i)
				}
			}
		}
	})

	t.Run("stale update is a conflict", func(t *testing.T) {
		ns := namespace(t, "stale")
		a := &ca.KubeStore{Secrets: c.Client.CoreV1(), Namespace: ns}
		b := &ca.KubeStore{Secrets: c.Client.CoreV1(), Namespace: ns}
		ba, err := ca.LoadOrCreateRoot(ctx, a, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.RotateRoot(ctx, a, ba, opts); err != nil {
			t.Fatal(err)
		}
		// b still holds the version before a's rotation.
		if err := b.Save(ctx, ba.Material()); !errors.Is(err, ca.ErrStoreConflict) {
			t.Fatalf("stale Save: %v, want ErrStoreConflict", err)
		}
	})

	t.Run("incomplete Secret is refused by name", func(t *testing.T) {
		ns := namespace(t, "broken")
		if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ca.SecretName}, Type: ca.SecretType,
			Data: map[string][]byte{"ca-cert.pem": []byte("x")},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := ca.LoadOrCreateRoot(ctx, &ca.KubeStore{Secrets: c.Client.CoreV1(), Namespace: ns}, opts)
		if !errors.Is(err, ca.ErrInvalidBundle) || !strings.Contains(err.Error(), "broken/istio-ca-secret") || !strings.Contains(err.Error(), "ca-key.pem") {
			t.Fatalf("err = %v, want ErrInvalidBundle naming the Secret and key", err)
		}
	})
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
