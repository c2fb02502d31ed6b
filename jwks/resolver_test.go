package jwks_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/jwks"
)

const (
	keysA = `{"keys":[{"kty":"RSA","kid":"a","e":"AQAB","n":"xyz"}]}`
	keysB = `{"keys":[{"kty":"RSA","kid":"b","e":"AQAB","n":"uvw"},{"kty":"EC","kid":"c","crv":"P-256","x":"1","y":"2"}]}`
	// keysBReordered holds keysB's keys in another order and layout.
	keysBReordered = "{\n \"keys\": [ {\"kty\":\"EC\",\"kid\":\"c\",\"crv\":\"P-256\",\"x\":\"1\",\"y\":\"2\"},\n {\"kty\":\"RSA\",\"kid\":\"b\",\"e\":\"AQAB\",\"n\":\"uvw\"} ] }"
)

// keyServer is a real TLS server of key sets and OpenID discovery
// documents; its handlers and bodies change under the test.
type keyServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string]string // path -> body; guarded by mu
	status map[string]int    // path -> status; guarded by mu
	hits   map[string]int    // guarded by mu
	hook   func(w http.ResponseWriter, r *http.Request) bool
}

func newKeyServer(t *testing.T) *keyServer {
	s := &keyServer{bodies: map[string]string{}, status: map[string]int{}, hits: map[string]int{}}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		body, ok := s.bodies[r.URL.Path]
		status := s.status[r.URL.Path]
		hook := s.hook
		s.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		if status != 0 {
			w.WriteHeader(status)
		}
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *keyServer) set(path, body string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies[path], s.status[path] = body, status
}

func (s *keyServer) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *keyServer) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool
}

type counts struct{ ok, fail atomic.Int64 }

func (c *counts) Fetched(ok bool) {
	if ok {
		c.ok.Add(1)
	} else {
		c.fail.Add(1)
	}
}

// run starts r until the test ends; its published lists arrive on the
// returned channel (the latest one wins when the test reads late).
func run(t *testing.T, r *jwks.Resolver) <-chan []jwks.KeySet {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan []jwks.KeySet, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, func(l []jwks.KeySet) { out <- l })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return out
}

// waitFor reads published lists until one satisfies ok.
func waitFor(t *testing.T, pub <-chan []jwks.KeySet, what string, ok func([]jwks.KeySet) bool) []jwks.KeySet {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-pub:
			if ok(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no published list with %s", what)
		}
	}
}

// until polls cond (a state, not a time) for up to 30s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func find(l []jwks.KeySet, issuer, uri string) (string, bool) {
	for _, k := range l {
		if k.Issuer == issuer && k.URI == uri {
			return k.JWKS, true
		}
	}
	return "", false
}

// TestResolverFetches: a jwksUri and an issuer's OpenID discovery both
// give their server's body, published as sent, over real TLS to an IP
// host.
func TestResolverFetches(t *testing.T) {
	srv := newKeyServer(t)
	srv.set("/keys", keysA, 0)
	srv.set("/idp/.well-known/openid-configuration", `{"issuer":"x","jwks_uri":"`+srv.URL+`/idp/keys"}`, 0)
	srv.set("/idp/keys", keysB, 0)
	m := &counts{}
	r := jwks.New(jwks.Options{RootCAs: srv.roots(), Metrics: m})
	pub := run(t, r)
	issuer := srv.URL + "/idp/" // a trailing slash is dropped before the well-known path
	r.Want([]jwks.Source{{Issuer: "https://a.example", URI: srv.URL + "/keys"}, {Issuer: issuer}})
	l := waitFor(t, pub, "both key sets", func(l []jwks.KeySet) bool { return len(l) == 2 })
	if got, _ := find(l, "https://a.example", srv.URL+"/keys"); got != keysA {
		t.Errorf("jwksUri key set %q, want %q", got, keysA)
	}
	if got, _ := find(l, issuer, ""); got != keysB {
		t.Errorf("discovered key set %q, want %q", got, keysB)
	}
	if m.ok.Load() != 3 || m.fail.Load() != 0 {
		t.Errorf("fetches ok=%d fail=%d, want 3 and 0", m.ok.Load(), m.fail.Load())
	}
	// A source no longer wanted leaves the list.
	r.Want([]jwks.Source{{Issuer: issuer}})
	waitFor(t, pub, "the dropped source gone", func(l []jwks.KeySet) bool {
		_, ok := find(l, issuer, "")
		return len(l) == 1 && ok
	})
}

// TestResolverRefresh: a refresh that finds new keys publishes them; one
// that finds the same keys reordered publishes nothing; a failing refresh
// keeps the last keys.
func TestResolverRefresh(t *testing.T) {
	srv := newKeyServer(t)
	srv.set("/keys", keysA, 0)
	r := jwks.New(jwks.Options{RootCAs: srv.roots(), RefreshInterval: 10 * time.Millisecond, FailureInterval: 10 * time.Millisecond})
	pub := run(t, r)
	src := jwks.Source{Issuer: "iss", URI: srv.URL + "/keys"}
	r.Want([]jwks.Source{src})
	waitFor(t, pub, "keysA", func(l []jwks.KeySet) bool { s, _ := find(l, "iss", src.URI); return s == keysA })

	srv.set("/keys", keysB, 0)
	waitFor(t, pub, "keysB", func(l []jwks.KeySet) bool { s, _ := find(l, "iss", src.URI); return s == keysB })

	srv.set("/keys", keysBReordered, 0)
	n := srv.hitCount("/keys")
	until(t, "three more refreshes", func() bool { return srv.hitCount("/keys") >= n+3 })
	select {
	case l := <-pub:
		t.Errorf("published %v after a refresh with the same keys", l)
	default:
	}

	srv.set("/keys", "oops", http.StatusServiceUnavailable)
	n = srv.hitCount("/keys")
	until(t, "three failed refreshes", func() bool { return srv.hitCount("/keys") >= n+3 })
	if s, _ := find(r.KeySets(), "iss", src.URI); s != keysB {
		t.Errorf("after failed refreshes the key set is %q, want the last good one", s)
	}
}

// TestResolverFailures: what is not a key set, or not fetched in time or
// within the size limit, gives no key set; the requests end.
func TestResolverFailures(t *testing.T) {
	srv := newKeyServer(t)
	big := `{"keys":[{"kty":"oct","k":"` + strings.Repeat("A", 4096) + `"}]}`
	srv.set("/big", big, 0)
	srv.set("/notkeys", `{"keys":"no"}`, 0)
	srv.set("/html", `<html>`, 0)
	srv.set("/500", keysA, http.StatusInternalServerError)
	srv.set("/nodisc/.well-known/openid-configuration", `{"issuer":"x"}`, 0)
	srv.set("/ok", keysA, 0)
	release := make(chan struct{})
	srv.hook = func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/slowheaders":
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return true
		case "/slowbody":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"keys":[`)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return true
		case "/chunked":
			for range 8 {
				fmt.Fprint(w, strings.Repeat(" ", 1024)) // no Content-Length: the reader bounds it
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, keysA)
			return true
		}
		return false
	}
	defer close(release)
	m := &counts{}
	r := jwks.New(jwks.Options{RootCAs: srv.roots(), MaxBytes: 2048, Metrics: m, RetryInterval: time.Hour})
	pub := run(t, r)
	var srcs []jwks.Source
	for _, p := range []string{"/big", "/notkeys", "/html", "/500", "/slowheaders", "/slowbody", "/chunked", "/missing"} {
		srcs = append(srcs, jwks.Source{Issuer: "iss", URI: srv.URL + p, Timeout: 200 * time.Millisecond})
	}
	srcs = append(srcs, jwks.Source{Issuer: srv.URL + "/nodisc", Timeout: 200 * time.Millisecond},
		jwks.Source{Issuer: "https://unreachable.invalid", Timeout: 200 * time.Millisecond},
		jwks.Source{Issuer: "iss", URI: srv.URL + "/ok"})
	r.Want(srcs)
	l := waitFor(t, pub, "the good key set", func(l []jwks.KeySet) bool { return len(l) == 1 })
	if s, _ := find(l, "iss", srv.URL+"/ok"); s != keysA {
		t.Fatalf("published %v, want /ok's keys only", l)
	}
	// Every request ends: 7 fail (too large, 500, the slow two, chunked
	// past the limit, 404, a host that does not resolve), 4 succeed (/ok,
	// and the bodies that are not key sets or have no jwks_uri).
	until(t, "every fetch to end", func() bool { return m.fail.Load()+m.ok.Load() == 11 })
	if m.fail.Load() != 7 {
		t.Errorf("%d failed requests, want 7", m.fail.Load())
	}
	if got := r.KeySets(); len(got) != 1 {
		t.Errorf("key sets %v, want /ok's only", got)
	}
}

// TestResolverBounds: at most MaxConcurrent requests in flight, at most
// MaxSources sources fetched.
func TestResolverBounds(t *testing.T) {
	srv := newKeyServer(t)
	var inflight, peak atomic.Int64
	gate := make(chan struct{})
	srv.hook = func(w http.ResponseWriter, r *http.Request) bool {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-gate
		fmt.Fprint(w, keysA)
		return true
	}
	r := jwks.New(jwks.Options{RootCAs: srv.roots(), MaxConcurrent: 2, MaxSources: 5})
	pub := run(t, r)
	var srcs []jwks.Source
	for i := range 8 {
		srcs = append(srcs, jwks.Source{Issuer: "iss", URI: fmt.Sprintf("%s/k%d", srv.URL, i)})
	}
	r.Want(srcs)
	until(t, "two requests in flight", func() bool { return inflight.Load() == 2 })
	go func() {
		for range 5 {
			gate <- struct{}{}
		}
	}()
	l := waitFor(t, pub, "five key sets", func(l []jwks.KeySet) bool { return len(l) == 5 })
	if p := peak.Load(); p > 2 {
		t.Errorf("%d requests in flight at once, limit 2", p)
	}
	for i := range 5 { // sorted sources: k0..k4 are kept, k5..k7 dropped
		if _, ok := find(l, "iss", fmt.Sprintf("%s/k%d", srv.URL, i)); !ok {
			t.Errorf("source k%d not fetched", i)
		}
	}
}

// TestResolverBlockedCIDR: an address in BlockedCIDRs is refused at dial
// time (the test server listens on 127.0.0.1).
func TestResolverBlockedCIDR(t *testing.T) {
	srv := newKeyServer(t)
	srv.set("/keys", keysA, 0)
	m := &counts{}
	r := jwks.New(jwks.Options{RootCAs: srv.roots(), BlockedCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Metrics: m, RetryInterval: time.Hour})
	run(t, r)
	r.Want([]jwks.Source{{URI: srv.URL + "/keys"}})
	until(t, "the blocked fetch to fail", func() bool { return m.fail.Load() == 1 })
	if srv.hitCount("/keys") != 0 || len(r.KeySets()) != 0 {
		t.Errorf("a blocked address was fetched")
	}
}

// TestResolverUntrustedServer: a server whose certificate the roots do not
// verify gives no key set.
func TestResolverUntrustedServer(t *testing.T) {
	srv := newKeyServer(t)
	srv.set("/keys", keysA, 0)
	m := &counts{}
	r := jwks.New(jwks.Options{RootCAs: x509.NewCertPool(), Metrics: m, RetryInterval: time.Hour})
	run(t, r)
	r.Want([]jwks.Source{{URI: srv.URL + "/keys"}})
	until(t, "the fetch to fail", func() bool { return m.fail.Load() == 1 })
	if len(r.KeySets()) != 0 {
		t.Error("keys from an unverified server")
	}
}

func TestParseErrors(t *testing.T) {
	for _, body := range []string{``, `[]`, `{}`, `{"keys":null}`, `{"keys":[1]}`, `{"keys":[{}]}`, `{"keys":[{"kty":""}]}`} {
		if _, err := jwks.ParseKeySet([]byte(body)); !errors.Is(err, jwks.ErrKeySet) {
			t.Errorf("ParseKeySet(%q) = %v, want ErrKeySet", body, err)
		}
	}
	for _, body := range []string{``, `{}`, `{"jwks_uri":""}`, `{"jwks_uri":1}`, `{"jwks_uri":"file:///etc/passwd"}`, `{"jwks_uri":"https://"}`} {
		if _, err := jwks.ParseDiscovery([]byte(body)); !errors.Is(err, jwks.ErrDiscovery) {
			t.Errorf("ParseDiscovery(%q) = %v, want ErrDiscovery", body, err)
		}
	}
	a, _ := jwks.ParseKeySet([]byte(keysB))
	b, _ := jwks.ParseKeySet([]byte(keysBReordered))
	if a != b || a == "" {
		t.Errorf("reordered key sets differ: %q vs %q", a, b)
	}
}

// TestResolverSettled: a resolver is settled when it wants nothing, and
// once every wanted source has been fetched once, successfully or not, and
// published.
func TestResolverSettled(t *testing.T) {
	srv := newKeyServer(t)
	srv.set("/keys", keysA, 0)
	var published atomic.Int64
	r := jwks.New(jwks.Options{RootCAs: srv.roots(), RetryInterval: time.Hour})
	if !r.Settled() {
		t.Fatal("a resolver wanting nothing is not settled")
	}
	r.Want([]jwks.Source{{Issuer: "a", URI: srv.URL + "/keys"}, {Issuer: "b", URI: srv.URL + "/missing"}})
	if r.Settled() {
		t.Fatal("settled before any fetch")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, func(l []jwks.KeySet) { published.Store(int64(len(l))) })
	}()
	defer func() { cancel(); <-done }()
	until(t, "settled", r.Settled)
	if published.Load() != 1 {
		t.Errorf("settled with %d key sets published, want 1", published.Load())
	}
}
