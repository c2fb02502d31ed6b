package rules

import (
	"encoding/base64"
	"slices"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

func secretYAML(ns, name string, data map[string][]byte) string {
	y := "apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + ", namespace: " + ns + "}\ndata:\n"
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		y += "  " + k + ": " + base64.StdEncoding.EncodeToString(data[k]) + "\n"
	}
	return y
}

// TestBuildSecrets: a router gets the credentials it names from Secrets of
// its own namespace — the certificate and key of kubernetes://NAME, the CA
// of kubernetes://NAME-cacert (from Secret NAME-cacert when it exists, else
// from NAME) — and nothing for names in another namespace, unknown
// Secrets, or Secrets that cannot serve the name; every resource passes
// ValidateAll.
func TestBuildSecrets(t *testing.T) {
	cert, key := testcert.SelfSigned(t, "gw.example.com")
	ca, _ := testcert.SelfSigned(t, "client-ca")
	otherCA, _ := testcert.SelfSigned(t, "other-ca")
	files := map[string][]byte{"secrets.yaml": []byte(
		secretYAML("istio-system", "gw-cert", map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca}) + "---\n" +
			secretYAML("istio-system", "mtls", map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca}) + "---\n" +
			secretYAML("istio-system", "mtls-cacert", map[string][]byte{"cacert": otherCA}) + "---\n" +
			secretYAML("istio-system", "broken", map[string][]byte{"tls.crt": []byte("not a certificate"), "tls.key": key}) + "---\n" +
			secretYAML("other", "other-cert", map[string][]byte{"tls.crt": cert, "tls.key": key}))}
	snap := lrLoad(t, files)
	router := func(ns string) *Scope {
		return NewScope(snap, &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: ns, ClusterID: "Kubernetes"})
	}
	names := []string{"kubernetes://gw-cert", "kubernetes://gw-cert-cacert", "kubernetes://mtls-cacert", "kubernetes://istio-system/gw-cert",
		"kubernetes://other/other-cert", "kubernetes://missing", "kubernetes://broken", "file-cert:/etc/x"}
	res, err := buildSecrets(router("istio-system"), encode.DefaultMesh(), encode.NewCache(), names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tlsv3.Secret{}
	for _, r := range res {
		var a anypb.Any
		if err := proto.Unmarshal(r.Any, &a); err != nil {
			t.Fatal(err)
		}
		s := &tlsv3.Secret{}
		if err := a.UnmarshalTo(s); err != nil {
			t.Fatal(err)
		}
		if err := s.ValidateAll(); err != nil {
			t.Errorf("%s: %v", r.Name, err)
		}
		if s.Name != r.Name {
			t.Errorf("resource %q holds Secret %q", r.Name, s.Name)
		}
		got[r.Name] = s
	}
	want := []string{"kubernetes://gw-cert", "kubernetes://gw-cert-cacert", "kubernetes://istio-system/gw-cert", "kubernetes://mtls-cacert"}
	var gotNames []string
	for n := range got {
		gotNames = append(gotNames, n)
	}
	slices.Sort(gotNames)
	if !slices.Equal(gotNames, want) {
		t.Fatalf("served %v, want %v", gotNames, want)
	}
	if tc := got["kubernetes://gw-cert"].GetTlsCertificate(); string(tc.GetCertificateChain().GetInlineBytes()) != string(cert) || string(tc.GetPrivateKey().GetInlineBytes()) != string(key) {
		t.Error("kubernetes://gw-cert does not carry the Secret's certificate and key")
	}
	if vc := got["kubernetes://gw-cert-cacert"].GetValidationContext(); string(vc.GetTrustedCa().GetInlineBytes()) != string(ca) {
		t.Error("kubernetes://gw-cert-cacert is not gw-cert's ca.crt")
	}
	if vc := got["kubernetes://mtls-cacert"].GetValidationContext(); string(vc.GetTrustedCa().GetInlineBytes()) != string(otherCA) {
		t.Error("kubernetes://mtls-cacert is not Secret mtls-cacert's CA")
	}

	// The other namespace's router gets its own Secret, and not istio-system's.
	res, err = buildSecrets(router("other"), encode.DefaultMesh(), encode.NewCache(), []string{"kubernetes://other-cert", "kubernetes://gw-cert"}, false, nil)
	if err != nil || len(res) != 1 || res[0].Name != "kubernetes://other-cert" {
		t.Fatalf("router in other: %v %v", res, err)
	}
}
