package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Security policies across the root namespace (istio-system), namespace a
// (its own PeerAuthentication, a workload one for app=db) and namespace b
// (nothing of its own).
const authnMesh = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: a}
spec: {mtls: {mode: PERMISSIVE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: db, namespace: a}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: DISABLE}
  portLevelMtls:
    8080: {mode: STRICT}
    9090: {mode: UNSET}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: web, namespace: a}
spec:
  selector: {matchLabels: {app: web}}
  portLevelMtls:
    7070: {mode: DISABLE}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: selects-root-only, namespace: istio-system}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: PERMISSIVE}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: c-namespace, namespace: c}
spec:
  selector: {matchLabels: {}}
  mtls: {mode: DISABLE}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: c-workload, namespace: c}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: STRICT}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: root-deny, namespace: istio-system}
spec:
  action: DENY
  rules: [{from: [{source: {namespaces: [evil]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: root-allow, namespace: istio-system}
spec:
  action: ALLOW
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: z-allow-db, namespace: a}
spec:
  selector: {matchLabels: {app: db}}
  rules: [{from: [{source: {principals: [cluster.local/ns/a/sa/web]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: a-deny, namespace: a}
spec:
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: audit, namespace: a}
spec:
  action: AUDIT
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: a}
spec:
  action: CUSTOM
  provider: {name: opa}
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: waypoint-only, namespace: a}
spec:
  targetRefs: [{kind: Service, group: "", name: db}]
  action: DENY
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: a}
spec:
  selector: {matchLabels: {app: web}}
  jwtRules: [{issuer: https://issuer.example, jwks: '{"keys":[]}'}]
`

func TestWorkloadSecurity(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"mesh.yaml": []byte(authnMesh)})
	mesh := encode.DefaultMesh()
	names := func(cs []*index.Config) []string {
		var out []string
		for _, c := range cs {
			out = append(out, snap.String(c.Key.Namespace)+"/"+snap.String(c.Key.Name))
		}
		return out
	}
	type portMode struct {
		port uint32
		mode encode.ServiceMTLS
	}
	tests := []struct {
		name, ns string
		labels   map[string]string
		mtls     encode.ServiceMTLS
		ports    []portMode
		allow    []string
		deny     []string
		rootDeny []string
		ra       []string
	}{
		{
			name: "mesh-wide STRICT in a namespace without policy", ns: "b", labels: map[string]string{"app": "db"},
			mtls: encode.ServiceMTLSStrict, ports: []portMode{{8080, encode.ServiceMTLSStrict}},
			allow: []string{"istio-system/root-allow"}, rootDeny: []string{"istio-system/root-deny"},
		},
		{
			name: "namespace PERMISSIVE overrides the mesh", ns: "a", labels: map[string]string{"app": "other"},
			mtls: encode.ServiceMTLSPermissive, ports: []portMode{{8080, encode.ServiceMTLSPermissive}},
			allow: []string{"istio-system/root-allow"}, rootDeny: []string{"istio-system/root-deny"}, deny: []string{"a/a-deny"},
		},
		{
			name: "workload DISABLE with port levels (STRICT, UNSET inherits)", ns: "a", labels: map[string]string{"app": "db", "v": "1"},
			mtls:  encode.ServiceMTLSDisable,
			ports: []portMode{{8080, encode.ServiceMTLSStrict}, {9090, encode.ServiceMTLSDisable}, {1234, encode.ServiceMTLSDisable}},
			allow: []string{"istio-system/root-allow", "a/z-allow-db"}, rootDeny: []string{"istio-system/root-deny"}, deny: []string{"a/a-deny"},
		},
		{
			name: "workload policy with UNSET mode inherits the namespace's", ns: "a", labels: map[string]string{"app": "web"},
			mtls: encode.ServiceMTLSPermissive, ports: []portMode{{7070, encode.ServiceMTLSDisable}, {80, encode.ServiceMTLSPermissive}},
			allow: []string{"istio-system/root-allow"}, rootDeny: []string{"istio-system/root-deny"}, deny: []string{"a/a-deny"},
			ra: []string{"a/jwt"},
		},
		{
			name: "an empty selector is the namespace's policy, a labelled one the workload's", ns: "c", labels: map[string]string{"app": "db"},
			mtls: encode.ServiceMTLSStrict, ports: []portMode{{8080, encode.ServiceMTLSStrict}},
			allow: []string{"istio-system/root-allow"}, rootDeny: []string{"istio-system/root-deny"},
		},
		{
			name: "an empty selector applies to every workload of the namespace", ns: "c", labels: map[string]string{"app": "web"},
			mtls: encode.ServiceMTLSDisable, ports: []portMode{{8080, encode.ServiceMTLSDisable}},
			allow: []string{"istio-system/root-allow"}, rootDeny: []string{"istio-system/root-deny"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			class := sidecarClass(tc.ns)
			class.Labels = encodeLabels(tc.labels)
			w := securityOf(NewScope(snap, class), mesh)
			if w.mtls != tc.mtls {
				t.Errorf("workload mode %d, want %d", w.mtls, tc.mtls)
			}
			for _, p := range tc.ports {
				if got := w.portMTLS(p.port); got != p.mode {
					t.Errorf("port %d: mode %d, want %d", p.port, got, p.mode)
				}
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{
				{"ALLOW", names(w.authz.Allow), tc.allow},
				{"DENY", names(w.authz.Deny), tc.deny},
				{"root DENY", names(w.authz.RootDeny), tc.rootDeny},
				{"RequestAuthentication", names(w.ra.Policies), tc.ra},
			} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s policies %v, want %v", c.what, c.got, c.want)
				}
			}
			if tc.ns == "a" && (!slices.Equal(names(w.authz.Audit), []string{"a/audit"}) || !slices.Equal(names(w.authz.Custom), []string{"a/ext"})) {
				t.Errorf("AUDIT %v, CUSTOM %v", names(w.authz.Audit), names(w.authz.Custom))
			}
		})
	}
}

func TestGRPCServerMTLS(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"mesh.yaml": []byte(authnMesh)})
	mesh := encode.DefaultMesh()
	for _, tc := range []struct {
		name   string
		labels map[string]string
		port   uint32
		want   encode.ServiceMTLS
	}{
		{"PERMISSIVE serves plaintext", map[string]string{"app": "x"}, 80, encode.ServiceMTLSPermissive},
		{"PERMISSIVE with tlsMode=istio is STRICT", map[string]string{"app": "x", "security.istio.io/tlsMode": "istio"}, 80, encode.ServiceMTLSStrict},
		{"port-level STRICT", map[string]string{"app": "db"}, 8080, encode.ServiceMTLSStrict},
		{"DISABLE stays plaintext with tlsMode=istio", map[string]string{"app": "db", "security.istio.io/tlsMode": "istio"}, 80, encode.ServiceMTLSDisable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class := grpcClass("a")
			class.Labels = encodeLabels(tc.labels)
			sc := NewScope(snap, class)
			if got := grpcServerMTLS(sc, securityOf(sc, mesh), tc.port); got != tc.want {
				t.Errorf("mode %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSecurityLabelsClass: a class keeps only the labels security
// selectors look at, so pods differing in other labels share a class, and
// the scope selects policies from what the class kept.
func TestSecurityLabelsClass(t *testing.T) {
	sw := newScopedWriter(t, authnMesh)
	e := newTestEngine(sw.w, testOptions{})
	snap := sw.w.Snapshot()
	class := func(ns string, labels map[string]string) encode.ProxyClass {
		return e.classOf(snap, &Node{ID: "p." + ns, Type: encode.ProxySidecar, Namespace: ns, Labels: labels})
	}
	a := class("a", map[string]string{"app": "db", "pod-template-hash": "x1", "statefulset.kubernetes.io/pod-name": "db-0"})
	b := class("a", map[string]string{"app": "db", "pod-template-hash": "y2", "statefulset.kubernetes.io/pod-name": "db-1"})
	if a != b || a.Labels != "app=db" {
		t.Errorf("classes %+v and %+v: want one class with labels app=db", a, b)
	}
	if web := class("a", map[string]string{"app": "web"}); web == a {
		t.Error("app=web shares app=db's class")
	}
	other := class("a", map[string]string{"team": "x"})
	if other.Labels != "-" {
		t.Errorf("labels %q, want - (none relevant)", other.Labels)
	}
	w := securityOf(NewScope(snap, &other), encode.DefaultMesh())
	if w.mtls != encode.ServiceMTLSPermissive || len(w.authz.Allow) != 1 {
		t.Errorf("unselected workload: mode %d, ALLOW %d policies (want PERMISSIVE, root-allow only)", w.mtls, len(w.authz.Allow))
	}
	if g := class("a", map[string]string{"team": "x", tlsModeLabel: "istio"}); g.Labels != tlsModeLabel+"=istio" {
		t.Errorf("labels %q: tlsMode must be kept", g.Labels)
	}
}

// TestInboundPassthroughPorts: a portLevelMtls port no service declares
// gets passthrough chains of its own mode (istiod's ForPassthrough), a
// service port's mode applies to its own chains, and no two chains of the
// listener match the same traffic (Envoy would reject the listener).
func TestInboundPassthroughPorts(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"mesh.yaml": []byte(`apiVersion: v1
kind: Service
metadata: {name: db, namespace: a}
spec:
  clusterIP: 10.96.0.40
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: a, labels: {app: db}}
spec: {containers: [{name: db, image: db}]}
status: {podIP: 10.244.0.40}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: db, namespace: a}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: STRICT}
  portLevelMtls:
    5432: {mode: DISABLE}
    9999: {mode: PERMISSIVE}
`)})
	sc := scopeFor(snap, sidecarClass("a"), "10.244.0.40")
	rs, err := buildListeners(sc, encode.DefaultMesh(), verifyCache(), []string{encode.VirtualInboundListenerName}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := decodeListeners(t, rs)[0]
	validate(t, l)
	byPort := map[uint32][]string{}
	seen := map[string]bool{}
	for _, fc := range l.FilterChains {
		m := fc.GetFilterChainMatch()
		p := m.GetDestinationPort().GetValue()
		sig := fmt.Sprint(p, m.GetTransportProtocol(), m.GetApplicationProtocols())
		if seen[sig] {
			t.Errorf("two chains match %s", sig)
		}
		seen[sig] = true
		byPort[p] = append(byPort[p], fc.Name+"/"+m.GetTransportProtocol())
	}
	want := map[uint32][]string{
		0:    {"virtualInbound-catchall-http/tls", "virtualInbound/tls"}, // STRICT
		5432: {"0.0.0.0_5432/raw_buffer"},                                // DISABLE
		9999: {"virtualInbound-catchall-http/tls", "virtualInbound-catchall-http/raw_buffer", "virtualInbound/tls", "virtualInbound/raw_buffer", "virtualInbound/tls"},
	}
	for p, w := range want {
		if !slices.Equal(byPort[p], w) {
			t.Errorf("port %d chains %v, want %v", p, byPort[p], w)
		}
	}
}

// TestDryRunPolicy: the istio.io/dry-run annotation reaches the row, and
// the policy's rules become shadow rules of its action's filter.
func TestDryRunPolicy(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"p.yaml": []byte(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: try-deny, namespace: a, annotations: {istio.io/dry-run: "true"}}
spec:
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]
`)})
	class := sidecarClass("a")
	w := securityOf(NewScope(snap, class), encode.DefaultMesh())
	if len(w.authz.Deny) != 1 || !w.authz.Deny[0].DryRun {
		t.Fatalf("DENY policies %v: want the dry-run one", w.authz.Deny)
	}
}

// TestSecurityLabelsFromWorkload: a proxy that sends no LABELS is selected
// by its Pod's labels, so two versions of one service are told apart.
func TestSecurityLabelsFromWorkload(t *testing.T) {
	sw := newScopedWriter(t, authnMesh, `apiVersion: v1
kind: Pod
metadata: {name: db-v1, namespace: a, labels: {app: db, version: v1}}
spec: {containers: [{name: db, image: db}]}
status: {podIP: 10.244.0.61}
---
apiVersion: v1
kind: Pod
metadata: {name: web-v2, namespace: a, labels: {app: web, version: v2}}
spec: {containers: [{name: web, image: web}]}
status: {podIP: 10.244.0.62}`)
	e := newTestEngine(sw.w, testOptions{})
	snap := sw.w.Snapshot()
	node := func(ip string) *Node {
		return &Node{ID: "p.a", Type: encode.ProxySidecar, Namespace: "a", IPs: []netip.Addr{netip.MustParseAddr(ip)}}
	}
	if got := e.classOf(snap, node("10.244.0.61")).Labels; got != "app=db" {
		t.Errorf("db pod: class labels %q, want app=db", got)
	}
	if got := e.classOf(snap, node("10.244.0.62")).Labels; got != "app=web" {
		t.Errorf("web pod: class labels %q, want app=web", got)
	}
	if got := e.classOf(snap, node("10.244.0.63")).Labels; got != "" {
		t.Errorf("no workload: class labels %q, want none", got)
	}
}
