package rules

import (
	"slices"
	"strconv"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	jwt "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// istiodCase loads an istiodref case's config.yaml (as the file source
// would) and returns it with the listeners of istiod's config dump for
// proxy.
func istiodCase(t *testing.T, name, proxy string) (files map[string][]byte, istiod map[string]*listener.Listener) {
	t.Helper()
	c := loadIstiodRefCase(t, name) // destrule_istiodref_test.go
	i := slices.IndexFunc(c.Proxies, func(p istiodref.Proxy) bool { return p.Name == proxy })
	if i < 0 {
		t.Fatalf("case %s has no proxy %s", name, proxy)
	}
	dump, err := istiodref.ReadDump(c.DumpFile(c.Proxies[i]))
	if err != nil {
		t.Fatalf("istiod's output for case %s: %v", name, err)
	}
	istiod = map[string]*listener.Listener{}
	for _, raw := range dump.Listeners {
		l := &listener.Listener{}
		unmarshalJSON(t, raw, l)
		istiod[l.Name] = l
	}
	return map[string][]byte{name + ".yaml": c.Config}, istiod
}

// jwtFilters returns the jwt_authn config of each HTTP chain of l, by
// chain name and its rank among the chains of that name (names repeat).
func jwtFilters(t *testing.T, l *listener.Listener) map[string]*jwt.JwtAuthentication {
	t.Helper()
	out := map[string]*jwt.JwtAuthentication{}
	seen := map[string]int{}
	for _, fc := range l.GetFilterChains() {
		name := fc.GetName() + "#" + strconv.Itoa(seen[fc.GetName()])
		seen[fc.GetName()]++
		for _, f := range fc.GetFilters() {
			if f.GetName() != "envoy.filters.network.http_connection_manager" {
				continue
			}
			for _, hf := range hcmFromFilter(t, f).GetHttpFilters() {
				if hf.GetName() != "envoy.filters.http.jwt_authn" {
					continue
				}
				cfg := &jwt.JwtAuthentication{}
				if err := hf.GetTypedConfig().UnmarshalTo(cfg); err != nil {
					t.Fatal(err)
				}
				out[name] = cfg
			}
		}
	}
	return out
}

// TestJWTAuthnMatchesIstiod (istiodref case jwt-keys): the sidecar's
// jwt_authn on every HTTP chain of virtualInbound equals istiod's, field
// for field: providers in issuer order, inline jwks as written,
// spaceDelimitedClaims, the several-provider requirement, and istiod's
// reject-all key set for a jwksUri and an issuer-only rule whose keys
// cannot be fetched.
func TestJWTAuthnMatchesIstiod(t *testing.T) {
	files, istiod := istiodCase(t, "jwt-keys", "reviews")
	snap := lrLoad(t, files)
	sc := scopeFor(snap, sidecarClass("jwt-keys"), "10.1.18.5")
	ls, err := buildListeners(sc, encode.DefaultMesh(), verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]*jwt.JwtAuthentication
	var gotAll map[string][]proto.Message
	for _, l := range decodeListeners(t, ls) {
		if l.Name == "virtualInbound" {
			validate(t, l)
			got = jwtFilters(t, l)
			gotAll = securityFilters(t, l)
		}
	}
	// The RBAC filter requiring a token (requestPrincipals) reads what
	// jwt_authn verified: istiod's too.
	for chain, w := range securityFilters(t, istiod["virtualInbound"]) {
		g := gotAll[chain]
		if len(g) != len(w) {
			t.Errorf("chain %q: %d security filters, istiod %d", chain, len(g), len(w))
			continue
		}
		for i := range w {
			if !proto.Equal(g[i], w[i]) {
				t.Errorf("chain %q filter %d differs from istiod's (-istiod +pilotfish):\n%s", chain, i, protoDiff(t, w[i], g[i]))
			}
		}
	}
	want := jwtFilters(t, istiod["virtualInbound"])
	if len(want) == 0 {
		t.Fatal("istiod's virtualInbound has no jwt_authn: the case is not what this test expects")
	}
	if len(got) != len(want) {
		t.Errorf("jwt_authn on %d chains, istiod on %d", len(got), len(want))
	}
	t.Logf("jwt_authn compared on %d chains", len(want))
	for chain, w := range want {
		g, ok := got[chain]
		if !ok {
			t.Errorf("chain %q: no jwt_authn (istiod has one)", chain)
			continue
		}
		if !proto.Equal(g, w) {
			t.Errorf("chain %q: jwt_authn differs from istiod's (-istiod +pilotfish):\n%s", chain, protoDiff(t, w, g))
		}
	}
}

// securityFilters returns, per chain of l (name#rank), its HTTP filters
// of security (jwt_authn, rbac) or, on a TCP chain, its network RBAC
// filters, in order.
func securityFilters(t *testing.T, l *listener.Listener) map[string][]proto.Message {
	t.Helper()
	out := map[string][]proto.Message{}
	seen := map[string]int{}
	for _, fc := range l.GetFilterChains() {
		name := fc.GetName() + "#" + strconv.Itoa(seen[fc.GetName()])
		seen[fc.GetName()]++
		var fs []proto.Message
		for _, f := range fc.GetFilters() {
			switch f.GetName() {
			case "envoy.filters.network.rbac":
				m, err := f.GetTypedConfig().UnmarshalNew()
				if err != nil {
					t.Fatal(err)
				}
				fs = append(fs, m)
			case "envoy.filters.network.http_connection_manager":
				for _, hf := range hcmFromFilter(t, f).GetHttpFilters() {
					if hf.GetName() != "envoy.filters.http.jwt_authn" && hf.GetName() != "envoy.filters.http.rbac" {
						continue
					}
					m, err := hf.GetTypedConfig().UnmarshalNew()
					if err != nil {
						t.Fatal(err)
					}
					fs = append(fs, m)
				}
			}
		}
		out[name] = fs
	}
	return out
}

// TestPolicyTargetRefsMatchIstiod (istiodref case authz-targetref): a
// sidecar ignores an AuthorizationPolicy targeting its Service or a
// Gateway, and a RequestAuthentication targeting a Gateway: every chain of
// its virtualInbound has the same jwt_authn and RBAC filters as istiod's
// (the selector policy's DENY only).
func TestPolicyTargetRefsMatchIstiod(t *testing.T) {
	files, istiod := istiodCase(t, "authz-targetref", "reviews")
	snap := lrLoad(t, files)
	sc := scopeFor(snap, sidecarClass("authz-target"), "10.1.19.5")
	ls, err := buildListeners(sc, encode.DefaultMesh(), verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string][]proto.Message
	for _, l := range decodeListeners(t, ls) {
		if l.Name == "virtualInbound" {
			got = securityFilters(t, l)
		}
	}
	want := securityFilters(t, istiod["virtualInbound"])
	n := 0
	for chain, w := range want {
		n += len(w)
		g := got[chain]
		if len(g) != len(w) {
			t.Errorf("chain %q: %d security filters, istiod %d", chain, len(g), len(w))
			continue
		}
		for i := range w {
			if !proto.Equal(g[i], w[i]) {
				t.Errorf("chain %q filter %d differs from istiod's (-istiod +pilotfish):\n%s", chain, i, protoDiff(t, w[i], g[i]))
			}
		}
	}
	if n == 0 {
		t.Fatal("istiod's virtualInbound has no security filter: the case is not what this test expects")
	}
	if len(got) != len(want) {
		t.Errorf("%d chains, istiod %d", len(got), len(want))
	}
}

// TestTrustDomainAliasesMatchIstiod (istiodref case authz-tdalias, whose
// mesh.yaml sets trustDomainAliases [old.td]): every chain of the
// sidecar's virtualInbound has istiod's RBAC filters, principals and trust
// domains rewritten for the alias.
func TestTrustDomainAliasesMatchIstiod(t *testing.T) {
	files, istiod := istiodCase(t, "authz-tdalias", "reviews")
	snap := lrLoad(t, files)
	sc := scopeFor(snap, sidecarClass("authz-tdalias"), "10.1.20.5")
	mesh := encode.DefaultMesh().Clone()
	mesh.TrustDomainAliases = []string{"old.td"} // the case's mesh.yaml
	ls, err := buildListeners(sc, mesh, verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string][]proto.Message
	for _, l := range decodeListeners(t, ls) {
		if l.Name == "virtualInbound" {
			validate(t, l)
			got = securityFilters(t, l)
		}
	}
	want := securityFilters(t, istiod["virtualInbound"])
	n := 0
	for chain, w := range want {
		n += len(w)
		g := got[chain]
		if len(g) != len(w) {
			t.Errorf("chain %q: %d security filters, istiod %d", chain, len(g), len(w))
			continue
		}
		for i := range w {
			if !proto.Equal(g[i], w[i]) {
				t.Errorf("chain %q filter %d differs from istiod's (-istiod +pilotfish):\n%s", chain, i, protoDiff(t, w[i], g[i]))
			}
		}
	}
	if n == 0 {
		t.Fatal("istiod's virtualInbound has no RBAC filter: the case is not what this test expects")
	}
}

// TestRouterJWTMatchesIstiod (istiodref case jwt-gateway): a router's
// jwt_authn, on every HTTP connection manager of every listener, equals
// istiod's: clear_route_cache set, istiod's reject-all set for the rule
// whose keys cannot be fetched.
func TestRouterJWTMatchesIstiod(t *testing.T) {
	files, istiod := istiodCase(t, "jwt-gateway", "gateway")
	snap := lrLoad(t, files)
	labels := map[string]string{"istio": "ingressgateway"}
	sc := routerScope(snap, "jwt-gw", labels)
	sc.Class.Labels = securityLabels(snap, "istio-system", &Node{Namespace: "jwt-gw", Labels: labels})
	rs, err := buildGatewayListeners(sc, encode.DefaultMesh(), verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]proto.Message{}
	for _, l := range decodeListeners(t, rs) {
		validate(t, l)
		for chain, fs := range securityFilters(t, l) {
			got[l.Name+"/"+chain] = fs
		}
	}
	n := 0
	for name, l := range istiod {
		for chain, w := range securityFilters(t, l) {
			n += len(w)
			g := got[name+"/"+chain]
			if len(g) != len(w) {
				t.Errorf("%s chain %q: %d security filters, istiod %d", name, chain, len(g), len(w))
				continue
			}
			for i := range w {
				if !proto.Equal(g[i], w[i]) {
					t.Errorf("%s chain %q filter %d differs from istiod's (-istiod +pilotfish):\n%s", name, chain, i, protoDiff(t, w[i], g[i]))
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("istiod's router has no jwt_authn: the case is not what this test expects")
	}
	t.Logf("%d security filters compared", n)
}
