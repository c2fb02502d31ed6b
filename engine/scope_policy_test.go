package engine

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// policyMesh adds namespace c (a service and a proxy) to scopedMesh: a's
// Sidecar does not see c, b (no Sidecar) sees everything.
const policyMesh = `
apiVersion: v1
kind: Service
metadata: {name: five, namespace: c}
spec:
  clusterIP: 10.96.0.5
  ports: [{name: http, port: 80}]
`

// policyProxies are the sidecars the push-scope tests watch on
// scopedMesh and policyMesh: a/one and a/other (namespace a, apps one and
// other), b and c, connected to a running engine.
type policyProxies struct {
	t                    *testing.T
	one, other, inB, inC *Conn
	name                 map[*Conn]string
}

// startPolicyProxies runs an engine on scopedMesh and policyMesh, connects
// its four sidecars and primes them: the first full push after connecting
// reaches everyone, and is drained.
func startPolicyProxies(t *testing.T) (*scopedWriter, *Engine, *policyProxies) {
	t.Helper()
	sw := newScopedWriter(t, scopedMesh, policyMesh)
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	go e.Run(ctx)
	connect := func(ip, pod, ns, app string) *Conn {
		n := sidecarNode(t, ip, pod, ns)
		n.Metadata.Fields["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"app": structpb.NewStringValue(app)}})
		c, err := e.Connect(ctx, n, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pp := &policyProxies{t: t}
	pp.one, pp.other = connect("10.1.0.1", "one", "a", "one"), connect("10.1.0.3", "other", "a", "other")
	pp.inB, pp.inC = connect("10.1.0.2", "pb", "b", "b"), connect("10.1.0.4", "pc", "c", "c")
	pp.name = map[*Conn]string{pp.one: "a/one", pp.other: "a/other", pp.inB: "b", pp.inC: "c"}
	sw.apply(`
apiVersion: v1
kind: Service
metadata: {name: prime, namespace: b}
spec: {clusterIP: 10.96.0.9, ports: [{name: http, port: 80}]}`)
	pp.drain()
	return sw, e, pp
}

// drain returns the proxies pushed to since the last call, in the order
// a/one, a/other, b, c.
func (pp *policyProxies) drain() []string {
	var got []string
	for _, c := range []*Conn{pp.one, pp.other, pp.inB, pp.inC} {
		n := 0
		for {
			if _, ok := waitPush(pp.t, c, 300*time.Millisecond); !ok {
				break
			}
			n++
		}
		if n > 0 {
			got = append(got, pp.name[c])
		}
	}
	return got
}

// TestSecurityPolicyPushScope: a PeerAuthentication, AuthorizationPolicy
// or RequestAuthentication change is pushed only to the proxies it can
// affect (its namespace and selector; a namespace-wide PeerAuthentication
// also to clients of that namespace's services; the root namespace to
// all), counted per proxy; a policy selecting no proxy pushes nothing.
func TestSecurityPolicyPushScope(t *testing.T) {
	sw, e, pp := startPolicyProxies(t)
	one, other, drain := pp.one, pp.other, pp.drain

	listeners := func(c *Conn) [][]byte {
		rs, err := e.generate(c.class.scope(e), e.cache, TypeListener, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, r := range rs {
			out = append(out, r.Any)
		}
		return out
	}
	otherBefore := listeners(other)
	keys := ingest.NewJWKSInput(sw.w, ingest.JWKSInputOptions{FetchURIs: true})

	for _, step := range []struct {
		what     string
		manifest string
		delete   *ingest.ObjectKey
		keys     []ingest.JWKSKeySet // key sets fetched (jwks_input.go)
		want     []string
	}{
		{"AuthorizationPolicy in a selecting app=one (a new selector key)", `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-one, namespace: a}
spec:
  selector: {matchLabels: {app: one}}
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]`, nil, nil, []string{"a/one"}},
		{"AuthorizationPolicy in a selecting no proxy", `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: nobody, namespace: a}
spec:
  selector: {matchLabels: {app: nobody}}
  rules: [{from: [{source: {namespaces: [a]}}]}]`, nil, nil, nil},
		{"namespace-wide AuthorizationPolicy in b", `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-a, namespace: b}
spec:
  rules: [{from: [{source: {namespaces: [a]}}]}]`, nil, nil, []string{"b"}},
		{"AuthorizationPolicy in a moved from app=one to app=other", `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-one, namespace: a}
spec:
  selector: {matchLabels: {app: other}}
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]`, nil, nil, []string{"a/one", "a/other"}},
		{"RequestAuthentication in a selecting app=other", `
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: a}
spec:
  selector: {matchLabels: {app: other}}
  jwtRules: [{issuer: https://issuer.example, jwksUri: https://issuer.example/jwks}]`, nil, nil, []string{"a/other"}},
		// A key set fetched reaches the proxies whose RequestAuthentication
		// names it; one no rule names reaches nobody.
		{"key set of a's RequestAuthentication fetched", "", nil,
			[]ingest.JWKSKeySet{{Issuer: "https://issuer.example", URI: "https://issuer.example/jwks", JWKS: `{"keys":[]}`}}, []string{"a/other"}},
		{"key set of no rule fetched", "", nil, []ingest.JWKSKeySet{
			{Issuer: "https://issuer.example", URI: "https://issuer.example/jwks", JWKS: `{"keys":[]}`},
			{Issuer: "https://elsewhere.example", JWKS: `{"keys":[]}`}}, nil},
		{"PeerAuthentication selecting app=one in a", `
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict-one, namespace: a}
spec:
  selector: {matchLabels: {app: one}}
  mtls: {mode: STRICT}`, nil, nil, []string{"a/one"}},
		// Clients of c's services (b sees them, a's Sidecar does not)
		// change their mTLS settings too.
		{"namespace-wide PeerAuthentication in c", `
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: c}
spec: {mtls: {mode: DISABLE}}`, nil, nil, []string{"b", "c"}},
		{"AuthorizationPolicy in a deleted", "",
			&ingest.ObjectKey{Kind: ingest.KindAuthorizationPolicy, Namespace: "a", Name: "deny-one"}, nil, []string{"a/other"}},
		{"root-namespace AuthorizationPolicy", `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh, namespace: istio-system}
spec:
  action: DENY
  rules: [{to: [{operation: {paths: [/debug]}}]}]`, nil, nil, []string{"a/one", "a/other", "b", "c"}},
	} {
		switch {
		case step.keys != nil:
			keys.Apply(step.keys)
		case step.delete != nil:
			var b index.Batch
			sw.conv.Delete(&b, *step.delete)
			sw.w.Apply(&b)
		default:
			sw.apply(step.manifest)
		}
		if got := drain(); !slices.Equal(got, step.want) {
			t.Fatalf("%s: pushed to %v, want %v", step.what, got, step.want)
		}
		if step.want == nil || step.want[0] != "a/one" {
			continue
		}
		if step.what == "AuthorizationPolicy in a selecting app=one (a new selector key)" {
			// The proxy not pushed to holds what it would get now.
			if !slices.EqualFunc(otherBefore, listeners(other), bytes.Equal) {
				t.Fatal("a/other was not pushed to, but its listeners changed")
			}
			if slices.EqualFunc(otherBefore, listeners(one), bytes.Equal) {
				t.Fatal("a/one's listeners did not change with a DENY policy selecting it")
			}
		}
	}
}
