package ingest

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestFileSourceSecrets: a Secret in the config directory becomes a
// ConfigSecret row holding only its credential keys (stringData merged over
// data, as the API server does); a Secret without credential keys is not
// kept; an edit changes the row and a delete removes it; a bad key is
// reported by field without quoting any value.
func TestFileSourceSecrets(t *testing.T) {
	f := newSourceFixture(t)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	f.write("gw/secret.yaml", `apiVersion: v1
kind: Secret
metadata: {name: gw-cert, namespace: istio-system}
type: kubernetes.io/tls
data:
  tls.crt: `+b64("CERT-1")+`
  tls.key: `+b64("KEY-1")+`
  unrelated: `+b64("TOP-SECRET")+`
stringData:
  ca.crt: CA-1
---
apiVersion: v1
kind: Secret
metadata: {name: db-password, namespace: istio-system}
stringData: {password: hunter2}
`)
	cs := f.sync()
	if len(cs.Configs[index.ConfigSecret]) != 1 {
		t.Fatalf("%d Secret rows changed, want 1 (the credential)", len(cs.Configs[index.ConfigSecret]))
	}
	row := func(name string) map[string][]byte { return secretRow(f.w, "istio-system", name) }
	data := row("gw-cert")
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "ca.crt,tls.crt,tls.key" || string(data["tls.crt"]) != "CERT-1" || string(data["ca.crt"]) != "CA-1" {
		t.Fatalf("row keys %v (tls.crt %q, ca.crt %q)", keys, data["tls.crt"], data["ca.crt"])
	}
	if row("db-password") != nil {
		t.Error("a Secret without credential keys has a row")
	}

	f.write("gw/secret.yaml", `apiVersion: v1
kind: Secret
metadata: {name: gw-cert, namespace: istio-system}
stringData: {tls.crt: CERT-2, tls.key: KEY-2}
`)
	if cs := f.sync(); len(cs.Configs[index.ConfigSecret]) != 1 || string(row("gw-cert")["tls.crt"]) != "CERT-2" {
		t.Fatalf("edit: %d changed, tls.crt %q", len(cs.Configs[index.ConfigSecret]), row("gw-cert")["tls.crt"])
	}

	f.write("gw/secret.yaml", `apiVersion: v1
kind: Secret
metadata: {name: gw-cert, namespace: istio-system}
data: {"bad key!": `+b64("VALUE-NOT-TO-LEAK")+`}
stringData: {tls.crt: CERT-3, tls.key: KEY-3}
`)
	f.sync()
	errs := f.src.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "data[bad key!]: invalid key") || strings.Contains(errs[0].Error(), "VALUE-NOT-TO-LEAK") {
		t.Fatalf("errors %v", errs)
	}
	if string(row("gw-cert")["tls.crt"]) != "CERT-2" {
		t.Error("the last good Secret was not kept")
	}

	f.remove("gw/secret.yaml")
	if cs := f.sync(); len(cs.Configs[index.ConfigSecret]) != 1 || row("gw-cert") != nil {
		t.Fatal("delete did not remove the Secret row")
	}
	if !bytes.Equal([]byte(strings.Join(CredentialKeys(), ",")), []byte(strings.Join(credentialKeys, ","))) {
		t.Fatal("CredentialKeys is not the kept list")
	}
}

func (f *sourceFixture) remove(name string) {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.dir, name)); err != nil {
		f.t.Fatal(err)
	}
}

// secretRow is the data of Secret ns/name's row in w's snapshot (nil when
// it has none).
func secretRow(w *index.Writer, ns, name string) map[string][]byte {
	snap := w.Snapshot()
	nsSym, _ := snap.Symbols.Lookup(ns)
	n, ok := snap.Symbols.Lookup(name)
	if !ok {
		return nil
	}
	c, ok := snap.Config(index.ConfigSecret, index.ConfigKey{Namespace: nsSym, Name: n})
	if !ok {
		return nil
	}
	return c.Spec.(map[string][]byte)
}
