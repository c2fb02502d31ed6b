package ingest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestKubeSourceSecrets: with Secrets on, Secrets from the API server
// become credential rows like the file source's: the informer's cache keeps
// only the credential keys (TestTransformSecret), an update rotates the
// row, a delete removes it, and a Secret without credential keys has none.
// Without it no Secret is read.
func TestKubeSourceSecrets(t *testing.T) {
	gw := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gw-cert", Namespace: "istio-system"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("CERT-1"), "tls.key": []byte("KEY-1"), "unrelated": []byte("TOP-SECRET")}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "istio-system"},
		Data: map[string][]byte{"password": []byte("hunter2")}}
	off := newKubeFixture(t, false, gw.DeepCopy())
	if n := len(configsOf(off.w.Snapshot(), index.ConfigSecret)); n != 0 {
		t.Fatalf("%d Secret rows without Secrets on", n)
	}
	f := newKubeFixtureOpts(t, newKubeFixtureClient(), false, KubeSourceOptions{Secrets: true}, gw, other)
	row := func(name string) map[string][]byte { return secretRow(f.w, "istio-system", name) }
	f.eventually("gw-cert row", func() bool { return string(row("gw-cert")["tls.crt"]) == "CERT-1" })
	if d := row("gw-cert"); len(d) != 2 || d["unrelated"] != nil {
		t.Fatalf("row keys %d, unrelated kept: %v", len(d), d["unrelated"] != nil)
	}
	if row("db") != nil {
		t.Error("a Secret without credential keys has a row")
	}

	up := gw.DeepCopy()
	up.Data["tls.crt"] = []byte("CERT-2")
	if _, err := f.kube.CoreV1().Secrets("istio-system").Update(context.Background(), up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("rotated", func() bool { return string(row("gw-cert")["tls.crt"]) == "CERT-2" })
	if err := f.kube.CoreV1().Secrets("istio-system").Delete(context.Background(), "gw-cert", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("deleted", func() bool { return row("gw-cert") == nil })
}

// TestTransformSecret: what the informer caches of a Secret.
func TestTransformSecret(t *testing.T) {
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "ns", Annotations: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Type: corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": []byte("C"), "tls.key": []byte("K"), "other": []byte("X")},
		StringData: map[string]string{"more": "Y"}}
	out, err := transformSecret(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if len(s.Data) != 2 || string(s.Data["tls.crt"]) != "C" || s.StringData != nil || s.ManagedFields != nil || s.Type != corev1.SecretTypeTLS {
		t.Fatalf("cached %+v", s)
	}
	if out, _ := transformSecret(&corev1.Secret{Data: map[string][]byte{"password": []byte("p")}}); out.(*corev1.Secret).Data != nil {
		t.Error("a non-credential Secret keeps data")
	}
	// A dockerconfigjson Secret (a WasmPlugin's pull secret) keeps its
	// docker config only.
	pull := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{}"), "tls.crt": []byte("C"), "other": []byte("X")}}
	if out, _ := transformSecret(pull); len(out.(*corev1.Secret).Data) != 1 || string(out.(*corev1.Secret).Data[corev1.DockerConfigJsonKey]) != "{}" {
		t.Errorf("a dockerconfigjson Secret is cached as %+v, want its docker config only", out)
	}
}

func configsOf(snap *index.Snapshot, kind index.ConfigKind) []*index.Config {
	var out []*index.Config
	snap.Configs(kind, func(c *index.Config) bool {
		out = append(out, c)
		return true
	})
	return out
}
