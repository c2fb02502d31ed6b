package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

func extAuthzMesh(t testing.TB, y string) *encode.Mesh {
	t.Helper()
	cfg, err := inject.ParseMesh([]byte(y))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	m, err := MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestApplyExtAuthzMesh: the ext_authz providers' fields land in
// encode.Mesh as values, other kinds are left to telemetry, and a provider
// istiod cannot use is kept with the reason (its policies then deny)
// rather than refusing the mesh config.
func TestApplyExtAuthzMesh(t *testing.T) {
	m := extAuthzMesh(t, `extensionProviders:
- name: h
  envoyExtAuthzHttp:
    service: a.b.svc.cluster.local
    port: 80
    timeout: 1.5s
    pathPrefix: /x
    failOpen: true
    statusOnError: "500"
    includeHeadersInCheck: [x-old]
    includeAdditionalHeadersInCheck: {z: "1", a: "2"}
    headersToUpstreamOnAllow: [u]
    headersToDownstreamOnDeny: [d]
    headersToDownstreamOnAllow: [o]
    includeRequestBodyInCheck: {maxRequestBytes: 10, packAsBytes: true}
- name: g
  envoyExtAuthzGrpc: {service: b/a.b.svc.cluster.local, port: 9000, failOpen: true}
- name: zipkin
  zipkin: {service: z.svc.cluster.local, port: 9411}
`)
	if len(m.ExtAuthz) != 2 {
		t.Fatalf("%d providers, want 2 (telemetry kinds skipped): %+v", len(m.ExtAuthz), m.ExtAuthz)
	}
	h, g := m.ExtAuthz[0], m.ExtAuthz[1]
	if h.Name != "h" || h.Kind != encode.ExtAuthzHTTP || h.Service != "a.b.svc.cluster.local" || h.Port != 80 ||
		h.Timeout != 1500*time.Millisecond || !h.TimeoutSet || h.PathPrefix != "/x" || !h.FailOpen || h.StatusOnError != 500 ||
		len(h.IncludeRequestHeaders) != 1 || h.IncludeRequestHeaders[0] != "x-old" ||
		len(h.AdditionalHeaders) != 2 || h.AdditionalHeaders[0] != (encode.ExtAuthzHeader{Key: "a", Value: "2"}) ||
		h.HeadersToUpstreamOnAllow[0] != "u" || h.HeadersToDownstreamOnDeny[0] != "d" || h.HeadersToDownstreamOnAllow[0] != "o" ||
		h.Body == nil || *h.Body != (encode.ExtAuthzBody{MaxRequestBytes: 10, PackAsBytes: true}) || h.Err != "" {
		t.Errorf("http provider: %+v", h)
	}
	if g.Name != "g" || g.Kind != encode.ExtAuthzGRPC || g.Service != "b/a.b.svc.cluster.local" || g.Port != 9000 ||
		g.TimeoutSet || !g.FailOpen || g.Err != "" {
		t.Errorf("grpc provider: %+v", g)
	}
	if extAuthzMesh(t, "").Digest() == m.Digest() {
		t.Error("the providers do not change the mesh's hash")
	}

	for _, tc := range []struct{ name, provider, err string }{
		{"Upper", `envoyExtAuthzGrpc: {service: a, port: 1}`, "provider name"},
		{"p", `envoyExtAuthzGrpc: {service: a, port: 0}`, "port must be"},
		{"p", `envoyExtAuthzGrpc: {service: "", port: 1}`, "service must not be empty"},
		{"p", `envoyExtAuthzGrpc: {service: a, port: 1, statusOnError: "999"}`, "statusOnError"},
		{"p", `envoyExtAuthzHttp: {service: a, port: 1, statusOnError: "x"}`, "statusOnError"},
		{"p", `envoyExtAuthzHttp: {service: a, port: 1, pathPrefix: "check"}`, "pathPrefix"},
		{"p", `envoyExtAuthzHttp: {service: a, port: 1, headersToUpstreamOnAllow: ["*"]}`, "headersToUpstreamOnAllow"},
		{"p", `envoyExtAuthzHttp: {service: a, port: 1, timeout: -1s}`, "timeout"},
	} {
		m := extAuthzMesh(t, "extensionProviders:\n- name: "+tc.name+"\n  "+tc.provider+"\n")
		if len(m.ExtAuthz) != 1 || !strings.Contains(m.ExtAuthz[0].Err, tc.err) {
			t.Errorf("%s: want an error containing %q, got %+v", tc.provider, tc.err, m.ExtAuthz)
		}
	}
	// Two providers of one name: the mesh config reader keeps the last
	// (istiod's merge by name), so applyExtAuthzMesh sees one.
	dup := extAuthzMesh(t, "extensionProviders:\n- {name: p, envoyExtAuthzGrpc: {service: a, port: 1}}\n- {name: p, envoyExtAuthzHttp: {service: a, port: 1}}\n")
	if len(dup.ExtAuthz) != 1 || dup.ExtAuthz[0].Kind != encode.ExtAuthzHTTP {
		t.Errorf("duplicate name: %+v", dup.ExtAuthz)
	}
}

// caseListeners generates the listeners of each proxy of case c with mesh
// and checks them with Envoy's validation.
func caseListeners(t *testing.T, c *istiodref.Case, mesh *encode.Mesh) map[string]map[string]proto.Message {
	t.Helper()
	sm := scenario.NewMesh()
	if err := sm.Apply(c.Name+"/config.yaml", c.Config); err != nil {
		t.Fatal(err)
	}
	e := New(sm.W, Options{Mesh: mesh})
	out := map[string]map[string]proto.Message{}
	for _, p := range c.Proxies {
		md, err := structpb.NewStruct(p.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		conn, err := e.Connect(ctx, &corev3.Node{Id: p.ID, Metadata: md}, "")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
		conn.Close()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = map[string]proto.Message{}
		for _, r := range rs {
			var a anypb.Any
			if err := proto.Unmarshal(r.Any, &a); err != nil {
				t.Fatal(err)
			}
			msg, err := a.UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			if err := xdstest.Validate(msg); err != nil {
				t.Errorf("%s: listener %s: %v", p.Name, r.Name, err)
			}
			out[p.Name][r.Name] = msg
		}
	}
	return out
}

// TestExtAuthzInvalidProviderDenies: when the mesh config's provider is
// invalid (statusOnError istiod refuses), the reviews sidecar of case
// authz-custom gets no ext_authz filter and its CUSTOM rules deny
// (istiod's "-deny-due-to-bad-CUSTOM-action" policies); without the
// mesh's providers at all, the same.
func TestExtAuthzInvalidProviderDenies(t *testing.T) {
	c, err := istiodref.LoadCase("authz-custom")
	if err != nil {
		t.Fatal(err)
	}
	for name, y := range map[string]string{
		"invalid":   "extensionProviders:\n- {name: http-authz, envoyExtAuthzHttp: {service: ext-authz.authz-custom.svc.cluster.local, port: 8000, statusOnError: '999'}}\n",
		"undefined": "",
	} {
		ls := caseListeners(t, c, extAuthzMesh(t, y))
		b, err := proto.Marshal(ls["reviews"]["virtualInbound"])
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, "envoy.filters.http.ext_authz") {
			t.Errorf("%s: an ext_authz filter for an unusable provider", name)
		}
		if !strings.Contains(s, "istio-ext-authz-http-authz-ns[authz-custom]-policy[ext-admin]-rule[0]-deny-due-to-bad-CUSTOM-action") {
			t.Errorf("%s: no deny rule for the CUSTOM policy", name)
		}
		if strings.Contains(s, "policy[ext-trial]") {
			t.Errorf("%s: the dry-run CUSTOM policy is enforced", name)
		}
	}
}

// FuzzApplyExtAuthzMesh: whatever the mesh config's providers,
// applyExtAuthzMesh never panics nor refuses the mesh, and the listeners
// of case authz-custom's sidecars pass Envoy's validation.
func FuzzApplyExtAuthzMesh(f *testing.F) {
	c, err := istiodref.LoadCase("authz-custom")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(c.Mesh))
	f.Add("extensionProviders:\n- {name: http-authz, envoyExtAuthzHttp: {service: ext-authz.authz-custom.svc.cluster.local, port: 8000, timeout: 315576000000s, includeRequestHeadersInCheck: ['*', '**', '']}}")
	f.Add("extensionProviders:\n- {name: grpc-authz, envoyExtAuthzGrpc: {service: /, port: 65536, timeout: 0s}}")
	f.Fuzz(func(t *testing.T, y string) {
		cfg, err := inject.ParseMesh([]byte(y))
		if err != nil {
			return
		}
		m := encode.DefaultMesh()
		applyExtAuthzMesh(m, cfg)
		if testing.Short() {
			return
		}
		caseListeners(t, c, m)
	})
}
