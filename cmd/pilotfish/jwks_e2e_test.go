package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

const ldsTypeURL = "type.googleapis.com/envoy.config.listener.v3.Listener"

const jwksE2EKeysA = `{"keys":[{"kty":"RSA","kid":"a","e":"AQAB","n":"aaaa"}]}`
const jwksE2EKeysB = `{"keys":[{"kty":"RSA","kid":"b","e":"AQAB","n":"bbbb"}]}`
const jwksE2EKeysC = `{"keys":[{"kty":"EC","kid":"c","crv":"P-256","x":"cc","y":"cc"}]}`

// jwksE2ERA: a jwksUri rule, an issuer-only rule (OpenID discovery) and a
// rule whose keys cannot be fetched; the key server is an IP host.
const jwksE2ERA = `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: shop}
spec:
  selector: {matchLabels: {app: reviews}}
  jwtRules:
  - {issuer: "https://a.example", jwksUri: "%[1]s/keys"}
  - {issuer: "%[1]s/idp"}
  - {issuer: "https://c.example", jwksUri: "%[1]s/missing"}
`

// TestE2EJWKSFetchedAndPushed: with a real TLS key server, pilotfish
// fetches a jwksUri and an issuer's discovered jwks_uri, inlines them in
// the sidecar's jwt_authn (valid Envoy config), inlines istiod's
// reject-all set for the rule whose fetch fails, and pushes the new keys
// when the server's change.
func TestE2EJWKSFetchedAndPushed(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string]string{"/keys": jwksE2EKeysA, "/idp/keys": jwksE2EKeysB}
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/idp/.well-known/openid-configuration" {
			fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, srv.URL+"/idp", srv.URL+"/idp/keys")
			return
		}
		mu.Lock()
		b, ok := bodies[r.URL.Path]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, b)
	}))
	defer srv.Close()

	dir := t.TempDir()
	for name, content := range map[string]string{"svc.yaml": svcYAML, "ra.yaml": fmt.Sprintf(jwksE2ERA, srv.URL)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{configDir: dir, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 100, resync: time.Second, shutdownGrace: time.Second,
		jwks: jwksOptions{refresh: 20 * time.Millisecond, roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
		defer func() { cancel(); <-done }()
	case err := <-done:
		cancel()
		t.Fatalf("serve exited: %v", err)
	}
	waitReady(t, "http://"+s.httpAddr.String())

	c := newADSClient(t, s.grpcAddr.String(), "reviews", "shop", "10.244.0.5")
	c.ackAll()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: ldsTypeURL})
	// Ready waits for the first fetches: the first answer has the keys.
	want := map[string]string{"https://a.example": jwksE2EKeysA, srv.URL + "/idp": jwksE2EKeysB, "https://c.example": encode.JWKSRejectAll}
	if got := firstJWT(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first LDS inlines %v, want %v", got, want)
	}

	mu.Lock()
	bodies["/keys"] = jwksE2EKeysC
	mu.Unlock()
	want["https://a.example"] = jwksE2EKeysC
	waitJWT(t, c, want)
}

// firstJWT returns the keys of the first LDS response's virtualInbound.
func firstJWT(t *testing.T, c *adsClient) map[string]string {
	t.Helper()
	for _, a := range c.recv(ldsTypeURL).GetResources() {
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			t.Fatal(err)
		}
		if l.GetName() == "virtualInbound" {
			got, _ := jwtKeysOf(t, l)
			return got
		}
	}
	t.Fatal("no virtualInbound")
	return nil
}

// waitJWT reads LDS pushes until the virtualInbound listener's jwt_authn
// inlines want (issuer -> key set) on every HTTP chain.
func waitJWT(t *testing.T, c *adsClient, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last map[string]string
	for time.Now().Before(deadline) {
		r := c.recv(ldsTypeURL)
		for _, a := range r.GetResources() {
			l := &listenerv3.Listener{}
			if err := a.UnmarshalTo(l); err != nil {
				t.Fatal(err)
			}
			if l.GetName() != "virtualInbound" {
				continue
			}
			if err := xdstest.Validate(l); err != nil {
				t.Fatalf("virtualInbound: %v", err)
			}
			got, chains := jwtKeysOf(t, l)
			if chains == 0 {
				t.Fatal("no HTTP chain of virtualInbound has jwt_authn")
			}
			last = got
			if fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
		}
	}
	t.Fatalf("jwt_authn inlines %v, want %v", last, want)
}

// jwtKeysOf returns the inline key set of each provider, by issuer, of the
// jwt_authn filters of l's HTTP chains (which must agree), and how many
// chains have one.
func jwtKeysOf(t *testing.T, l *listenerv3.Listener) (map[string]string, int) {
	var out map[string]string
	n := 0
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			h := &hcmv3.HttpConnectionManager{}
			if f.GetTypedConfig().UnmarshalTo(h) != nil {
				continue
			}
			for _, hf := range h.GetHttpFilters() {
				if hf.GetName() != "envoy.filters.http.jwt_authn" {
					continue
				}
				cfg := &jwtv3.JwtAuthentication{}
				if err := hf.GetTypedConfig().UnmarshalTo(cfg); err != nil {
					t.Fatal(err)
				}
				m := map[string]string{}
				for _, p := range cfg.GetProviders() {
					m[p.GetIssuer()] = p.GetLocalJwks().GetInlineString()
				}
				if out != nil && fmt.Sprint(out) != fmt.Sprint(m) {
					t.Fatalf("chains disagree: %v and %v", out, m)
				}
				out = m
				n++
			}
		}
	}
	return out, n
}
