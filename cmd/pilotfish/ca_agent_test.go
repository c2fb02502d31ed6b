package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// The real istio-agent (pilot-agent from istio.io/istio, built by `make
// pilot-agent` into .cache/bin, see tools/pilot-agent) obtains and rotates
// its workload certificate from pilotfish, authenticated by a JWT of an
// issuer in the JWT rule: once over the plaintext port and once over the TLS
// port. `make test` builds the agent first, so this runs in CI; run alone,
// it is skipped (with a message) when the binary is absent.
//
// The real Kubernetes service account token path (TokenReview against a
// kube-apiserver) is the Kubernetes issue's test; here the JWT rule path
// stands in for it.

// agentBinary returns the pilot-agent binary, or skips.
func agentBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PILOT_AGENT")
	if p == "" {
		p = filepath.Join("..", "..", ".cache", "bin", "pilot-agent")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("pilot-agent not built (%v): `make test` builds it first (make pilot-agent)", err)
		}
		t.Skipf("pilot-agent not built (%v): run `make pilot-agent` (make test does)", err)
	}
	return abs
}

// testIssuer signs JWTs as a JWT_RULE issuer would.
type testIssuer struct {
	iss  string
	key  *ecdsa.PrivateKey
	kid  string
	rule string // JWT_RULE with the public JWKS inline
}

func newTestIssuer(t *testing.T, iss string, audiences ...string) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ti := &testIssuer{iss: iss, key: key, kid: "k1"}
	jwks, err := ca.JWKSFromKeys(jose.JSONWebKey{Key: key, KeyID: ti.kid, Algorithm: string(jose.ES256), Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	rule, _ := json.Marshal([]map[string]any{{"issuer": iss, "audiences": audiences, "jwks": jwks}})
	ti.rule = string(rule)
	return ti
}

// token returns a signed token for system:serviceaccount:ns:sa.
func (ti *testIssuer) token(t *testing.T, ns, sa, aud string, ttl time.Duration) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ti.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", ti.kid))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(sig).Claims(jwt.Claims{
		Issuer: ti.iss, Subject: "system:serviceaccount:" + ns + ":" + sa, Audience: jwt.Audience{aud},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// startCAServe runs `pilotfish serve` with the CA and its TLS port on
// ephemeral ports, and returns the bound addresses.
func startCAServe(t *testing.T, co caOptions) started {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(svcYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return startCAServeDir(t, dir, co)
}

// startCAServeDir is startCAServe on a config directory of the caller's.
func startCAServeDir(t *testing.T, dir string, co caOptions) started {
	t.Helper()
	return startServeWith(t, &serveOptions{configDir: dir, ca: co})
}

// startServeWith runs serve in-process with o's sources and CA (the test
// timings and loopback addresses are set here) and waits for /ready.
func startServeWith(t *testing.T, o *serveOptions) started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o.grpcAddr, o.httpAddr, o.domain = "127.0.0.1:0", "127.0.0.1:0", "cluster.local"
	if o.logLevel == "" {
		o.logLevel = "error"
	}
	o.debounceAfter, o.debounceMax, o.enableEDSDebounce = 10*time.Millisecond, time.Second, true
	o.pushThrottle, o.resync, o.shutdownGrace = 10, time.Second, time.Second
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("serve did not shut down")
		}
	})
	waitReady(t, "http://"+s.httpAddr.String()) // xDS streams are refused before
	return s
}

// forward15010 gives the plaintext port an address ending in ":15010":
// istio-agent talks to its CA without TLS only on that port (any other
// address gets TLS). It listens on 127.0.0.1:15010 when that is free,
// otherwise on a Unix socket whose path ends in ":15010" (gRPC's unix:
// target), and copies connections to target. It returns the CA_ADDR.
func forward15010(t *testing.T, target string) string {
	t.Helper()
	addr := "127.0.0.1:15010"
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		dir, derr := os.MkdirTemp("", "pf")
		if derr != nil {
			t.Fatal(derr)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		path := filepath.Join(dir, "ca:15010")
		t.Logf("127.0.0.1:15010 is taken (%v); using unix socket %s", err, path)
		if lis, err = net.Listen("unix", path); err != nil {
			t.Fatal(err)
		}
		addr = "unix://" + path
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			})
		}
	})
	return addr
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// agentRun is one istio-agent process.
type agentRun struct {
	dir, out string
	log      *lockedBuffer
}

// runAgent starts pilot-agent as a proxyless workload (no Envoy) of
// namespace ns, service account sa, with the token in its token file, its
// CA at caAddr and certificates written to OUTPUT_CERTS. extraEnv adds
// settings (CA_ROOT_CA, ...).
func runAgent(t *testing.T, bin, caAddr, xdsAddr, ns, sa, token string, extraEnv ...string) *agentRun {
	t.Helper()
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "var", "run", "secrets", "tokens")
	if err := os.MkdirAll(tokDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tokDir, "istio-token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &agentRun{dir: dir, out: filepath.Join(dir, "out"), log: &lockedBuffer{}}
	if err := os.MkdirAll(r.out, 0o755); err != nil { // istio-agent does not create it
		t.Fatal(err)
	}
	proxyConfig, _ := json.Marshal(map[string]any{
		"discoveryAddress": xdsAddr, "controlPlaneAuthPolicy": "NONE", "statusPort": freePort(t),
		"proxyAdminPort": freePort(t),
	})
	cmd := exec.Command(bin, "proxy", "sidecar")
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"DISABLE_ENVOY=true", "CA_ADDR=" + caAddr, "OUTPUT_CERTS=" + r.out,
		"PROXY_CONFIG=" + string(proxyConfig),
		"POD_NAME=" + sa + "-0", "POD_NAMESPACE=" + ns, "SERVICE_ACCOUNT=" + sa, "INSTANCE_IP=127.0.0.1",
		"TRUST_DOMAIN=cluster.local", "JWT_POLICY=third-party-jwt",
		// A short lifetime: istio-agent renews at half of it.
		"SECRET_TTL=8s",
	}, extraEnv...)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("pilot-agent output:\n%s", r.log.String())
		}
	})
	return r
}

// cert returns the agent's current workload certificate and root bundle,
// or an error while they are not (completely) written.
func (r *agentRun) cert() (*x509.Certificate, []*x509.Certificate, *x509.CertPool, error) {
	chainPEM, err := os.ReadFile(filepath.Join(r.out, "cert-chain.pem"))
	if err != nil {
		return nil, nil, nil, err
	}
	rootPEM, err := os.ReadFile(filepath.Join(r.out, "root-cert.pem"))
	if err != nil {
		return nil, nil, nil, err
	}
	var chain []*x509.Certificate
	for rest := chainPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, nil, nil, err
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, nil, nil, errors.New("empty cert-chain.pem")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(rootPEM) {
		return nil, nil, nil, errors.New("no root in root-cert.pem")
	}
	return chain[0], chain, pool, nil
}

// waitRotation waits for the agent's first certificate, checks it, then
// waits for a renewed one (another serial) and checks that too.
func (r *agentRun) waitRotation(t *testing.T, wantID string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var serials []string
	var lastErr error
	for time.Now().Before(deadline) && len(serials) < 2 {
		time.Sleep(200 * time.Millisecond)
		leaf, chain, roots, err := r.cert()
		if err != nil {
			lastErr = err
			continue
		}
		if len(serials) > 0 && serials[len(serials)-1] == leaf.SerialNumber.String() {
			continue
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != wantID {
			t.Fatalf("certificate identity %v, want %s", leaf.URIs, wantID)
		}
		inter := x509.NewCertPool()
		for _, c := range chain[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Fatalf("certificate does not verify against the agent's root-cert.pem: %v", err)
		}
		if life := leaf.NotAfter.Sub(leaf.NotBefore); life > 8*time.Second+3*time.Minute {
			t.Fatalf("certificate lifetime %s, want SECRET_TTL 8s (+2m backdating)", life)
		}
		serials = append(serials, leaf.SerialNumber.String())
		t.Logf("certificate %d: %s serial %s, not after %s", len(serials), wantID, leaf.SerialNumber, leaf.NotAfter.Format(time.TimeOnly))
	}
	if len(serials) < 2 {
		t.Fatalf("got %d certificates, want a first one and a rotation (last error: %v)", len(serials), lastErr)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestCAIstioAgent(t *testing.T) {
	bin := agentBinary(t)
	iss := newTestIssuer(t, "https://issuer.pilotfish.test", "istio-ca")
	root := filepath.Join(t.TempDir(), "root-cert.pem")
	s := startCAServe(t, caOptions{tlsAddr: "127.0.0.1:0", jwtRule: iss.rule, rootCertOut: root,
		trustDomain: "cluster.local", tokenAudiences: []string{"istio-ca"}})
	plainCA := forward15010(t, s.grpcAddr.String())
	tlsPort := s.grpcTLSAddr.(*net.TCPAddr).Port

	t.Run("group", func(t *testing.T) {
		t.Run("plaintext-15010", func(t *testing.T) {
			t.Parallel()
			a := runAgent(t, bin, plainCA, s.grpcAddr.String(), "shop", "reviews",
				iss.token(t, "shop", "reviews", "istio-ca", time.Hour))
			a.waitRotation(t, "spiffe://cluster.local/ns/shop/sa/reviews")
			// istio-agent logs this when it talks to its CA without TLS.
			if !strings.Contains(a.log.String(), "Debug mode or IP-secure network") {
				t.Error("istio-agent did not use the plaintext CA path")
			}
		})
		t.Run("tls-15012", func(t *testing.T) {
			t.Parallel()
			// localhost: istio-agent then expects istiod's name,
			// istiod.istio-system.svc, on the serving certificate.
			a := runAgent(t, bin, fmt.Sprintf("localhost:%d", tlsPort), s.grpcAddr.String(), "shop", "ratings",
				iss.token(t, "shop", "ratings", "istio-ca", time.Hour), "CA_ROOT_CA="+root)
			a.waitRotation(t, "spiffe://cluster.local/ns/shop/sa/ratings")
			if !strings.Contains(a.log.String(), "cert with certs: "+root) {
				t.Error("istio-agent did not use TLS with CA_ROOT_CA")
			}
		})
		t.Run("tls-15012-client-certificate", func(t *testing.T) {
			t.Parallel()
			// A workload (a VM, say) that holds a certificate from this CA
			// (PROV_CERT: cert-chain.pem, key.pem, root-cert.pem) renews
			// with it over mTLS. Its token is worthless, so only the client
			// certificate can authenticate it.
			prov := filepath.Join(t.TempDir(), "prov")
			issueFiles(t, s.grpcAddr.String(), iss.token(t, "shop", "details", "istio-ca", time.Hour), prov)
			a := runAgent(t, bin, fmt.Sprintf("localhost:%d", tlsPort), s.grpcAddr.String(), "shop", "details",
				"not-a-token", "PROV_CERT="+prov)
			a.waitRotation(t, "spiffe://cluster.local/ns/shop/sa/details")
		})
	})
}
