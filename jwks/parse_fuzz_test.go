package jwks_test

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/jwks"
)

// FuzzParseKeySet: any body parses or errs without panicking, and an
// accepted body's canonical form is stable.
func FuzzParseKeySet(f *testing.F) {
	for _, s := range []string{keysA, keysB, keysBReordered, `{"keys":[]}`, `{"keys":[{"kty":"RSA"}]}`, `[`, `{"keys":[{"kty":1}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c1, err := jwks.ParseKeySet(body)
		if err != nil {
			return
		}
		c2, err := jwks.ParseKeySet(body)
		if err != nil || c1 != c2 {
			t.Fatalf("unstable: %q then %q (%v)", c1, c2, err)
		}
	})
}

// FuzzParseDiscovery: any document parses or errs without panicking; an
// accepted jwks_uri is non-empty.
func FuzzParseDiscovery(f *testing.F) {
	for _, s := range []string{`{"jwks_uri":"https://idp.example/keys"}`, `{"jwks_uri":"http://10.0.0.1:8080/k"}`, `{"jwks_uri":5}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		uri, err := jwks.ParseDiscovery(body)
		if err == nil && uri == "" {
			t.Fatal("accepted an empty jwks_uri")
		}
	})
}
