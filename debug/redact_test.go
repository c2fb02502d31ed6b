package debug

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestConfigDumpRedactsCredential: a gateway credential as encode builds it
// goes through config_dump's redaction with its certificate intact and its
// private key gone, in both the binary and the JSON form.
func TestConfigDumpRedactsCredential(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "gw"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	s, err := encode.BuildCredentialSecret("kubernetes://gw", "ns/gw", false, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	a, err := anypb.New(s)
	if err != nil {
		t.Fatal(err)
	}
	red, err := redactSecret(a)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(red)
	if err != nil {
		t.Fatal(err)
	}
	kb64 := base64.StdEncoding.EncodeToString(keyPEM) // bytes as protojson writes them
	for name, b := range map[string][]byte{"binary": red.GetValue(), "json": js} {
		if bytes.Contains(b, keyPEM) || bytes.Contains(b, kder) || bytes.Contains(b, []byte(kb64)) {
			t.Fatalf("%s dump holds the private key", name)
		}
	}
	if !bytes.Contains(red.GetValue(), certPEM) || !bytes.Contains(red.GetValue(), []byte("[redacted]")) {
		t.Fatal("redaction lost the certificate or left no marker")
	}
}
