package envoypatch

import (
	"errors"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"
)

// spec decodes an EnvoyFilter spec written in YAML, as ingest does.
func spec(t testing.TB, y string) *networking.EnvoyFilter {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	ef := &networking.EnvoyFilter{}
	if err := protojson.Unmarshal(js, ef); err != nil {
		t.Fatal(err)
	}
	return ef
}

func compile(t testing.TB, y string) *Filter {
	t.Helper()
	f, err := Compile("shop", "ef", spec(t, y))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCompile checks istiod's wrapping of patches: a missing match becomes
// {context: ANY}, INSERT_* on an applyTo without order becomes ADD (kept on
// the four ordered ones), values are typed by applyTo with unknown fields
// dropped, and REMOVE has no value.
func TestCompile(t *testing.T) {
	f := compile(t, `configPatches:
- applyTo: CLUSTER
  patch: {operation: INSERT_BEFORE, value: {name: added, connect_timeout: 2s, someFutureField: {a: 1}}}
- applyTo: HTTP_FILTER
  match: {context: SIDECAR_INBOUND}
  patch: {operation: INSERT_FIRST, value: {name: envoy.filters.http.cors}}
- applyTo: VIRTUAL_HOST
  match: {context: GATEWAY, routeConfiguration: {vhost: {name: a}}}
  patch: {operation: INSERT_AFTER, value: {name: v}}
- applyTo: NETWORK_FILTER
  patch: {operation: REMOVE}
`)
	if f.Source != "shop/ef" || len(f.Patches) != 4 {
		t.Fatalf("filter %q with %d patches, want shop/ef with 4", f.Source, len(f.Patches))
	}
	c := f.Patches[0]
	if c.Match.GetContext() != networking.EnvoyFilter_ANY || c.Match.GetCluster() != nil {
		t.Errorf("missing match compiled to %v, want {context: ANY}", c.Match)
	}
	if c.Operation != networking.EnvoyFilter_Patch_ADD {
		t.Errorf("CLUSTER INSERT_BEFORE compiled to %v, want ADD", c.Operation)
	}
	if v, ok := c.Value.(*cluster.Cluster); !ok || v.GetName() != "added" || v.GetConnectTimeout().AsDuration().Seconds() != 2 {
		t.Errorf("CLUSTER value %v, want a Cluster named added with connect_timeout 2s", c.Value)
	}
	if op := f.Patches[1].Operation; op != networking.EnvoyFilter_Patch_INSERT_FIRST {
		t.Errorf("HTTP_FILTER INSERT_FIRST compiled to %v", op)
	}
	if v, ok := f.Patches[1].Value.(*hcm.HttpFilter); !ok || v.GetName() != "envoy.filters.http.cors" {
		t.Errorf("HTTP_FILTER value %v", f.Patches[1].Value)
	}
	if op := f.Patches[2].Operation; op != networking.EnvoyFilter_Patch_ADD {
		t.Errorf("VIRTUAL_HOST INSERT_AFTER compiled to %v, want ADD", op)
	}
	if p := f.Patches[3]; p.Value != nil || p.Index != 3 || p.Source != "shop/ef" {
		t.Errorf("REMOVE: value %v, index %d, source %q", p.Value, p.Index, p.Source)
	}
}

// TestCompileErrors checks that a patch that does not compile is left out
// (as istiod leaves it out) and named in the error, the rest kept.
func TestCompileErrors(t *testing.T) {
	f, err := Compile("shop", "bad", spec(t, `configPatches:
- applyTo: CLUSTER
  patch: {operation: MERGE, value: {connect_timeout: "not a duration"}}
- applyTo: CLUSTER
- applyTo: HTTP_FILTER
  patch:
    operation: ADD
    value: {name: x, typed_config: {"@type": type.googleapis.com/no.such.Type}}
- applyTo: CLUSTER
  patch: {operation: REMOVE}
`))
	if f == nil || len(f.Patches) != 1 || f.Patches[0].Index != 3 {
		t.Fatalf("filter %+v, want only patch 3", f)
	}
	for _, want := range []string{
		"spec.configPatches[0].patch.value: not a *clusterv3.Cluster",
		"spec.configPatches[1].patch: required",
		"spec.configPatches[2].patch.value: not a *http_connection_managerv3.HttpFilter: referenced type unknown",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
	var pe *PatchError
	if !errors.As(err, &pe) || pe.Index != 0 {
		t.Errorf("error %v is no *PatchError for patch 0", err)
	}
	if _, err := Value(networking.EnvoyFilter_INVALID, spec(t, `configPatches: [{patch: {value: {a: 1}}}]`).ConfigPatches[0].Patch.Value); !errors.Is(err, ErrNoValueType) {
		t.Errorf("value for applyTo INVALID: %v, want ErrNoValueType", err)
	}
}

// TestPatchHash checks that Hash is deterministic and covers what applies
// (not the source or index): equal patches of two filters hash equal, and
// each of applyTo, operation, match and value changes it.
func TestPatchHash(t *testing.T) {
	const base = `configPatches:
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {service: a.b.svc.cluster.local}}
  patch: {operation: MERGE, value: {connect_timeout: 2s, metadata: {filter_metadata: {x: {k1: 1, k2: 2, k3: 3, k4: 4}}}}}
`
	h := compile(t, base).Patches[0].Hash
	for i := 0; i < 20; i++ {
		f, _ := Compile("other", "name", spec(t, base))
		if f.Patches[0].Hash != h {
			t.Fatalf("hash of the same patch varies: %x, %x", f.Patches[0].Hash, h)
		}
	}
	seen := map[uint64]string{h: "base"}
	for name, y := range map[string]string{
		"applyTo":   strings.Replace(base, "applyTo: CLUSTER", "applyTo: LISTENER", 1),
		"operation": strings.Replace(base, "MERGE", "ADD", 1),
		"match":     strings.Replace(base, "SIDECAR_OUTBOUND", "GATEWAY", 1),
		"value":     strings.Replace(base, "2s", "3s", 1),
		"class":     strings.Replace(base, "operation: MERGE", "operation: MERGE, filterClass: AUTHZ", 1),
	} {
		f, err := Compile("shop", "ef", spec(t, y))
		if err != nil || len(f.Patches) != 1 {
			t.Fatalf("%s: %v", name, err)
		}
		if prev, dup := seen[f.Patches[0].Hash]; dup {
			t.Errorf("changing %s hashes like %s", name, prev)
		}
		seen[f.Patches[0].Hash] = name
	}
}

// TestMatchesProxy checks match.proxy with istiod's rules: the well-known
// ^1\.NN.* form by prefix, other expressions as regular expressions (a
// proxy without a version matches none), an expression over 1024
// characters matches nothing, and every metadata entry must be equal.
func TestMatchesProxy(t *testing.T) {
	md := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		match   string
		version string
		meta    map[string]string
		want    bool
	}{
		{`{}`, "", nil, true},
		{`{proxy: {}}`, "", nil, true},
		{`{proxy: {proxyVersion: '^1\.31.*'}}`, "1.31.0", nil, true},
		{`{proxy: {proxyVersion: '^1\.31.*'}}`, "1.310.0", nil, true}, // a prefix, as istiod's fast path
		{`{proxy: {proxyVersion: '^1\.31.*'}}`, "1.30.2", nil, false},
		{`{proxy: {proxyVersion: '^1\.31.*'}}`, "", nil, false},
		{`{proxy: {proxyVersion: '^1\.(30|31).*'}}`, "1.30.2", nil, true},
		{`{proxy: {proxyVersion: '^1\.(30|31).*'}}`, "1.29.0", nil, false},
		{`{proxy: {proxyVersion: '.*'}}`, "", nil, false},
		{`{proxy: {proxyVersion: '1\.3'}}`, "x1.3y", nil, true}, // unanchored, as Go's MatchString
		{`{proxy: {proxyVersion: '` + strings.Repeat("a", 1025) + `'}}`, strings.Repeat("a", 1025), nil, false},
		{`{proxy: {metadata: {ROLE: edge, ZONE: a}}}`, "1.31.0", map[string]string{"ROLE": "edge", "ZONE": "a"}, true},
		{`{proxy: {metadata: {ROLE: edge, ZONE: a}}}`, "1.31.0", map[string]string{"ROLE": "edge"}, false},
		{`{proxy: {proxyVersion: '^1\.31.*', metadata: {ROLE: edge}}}`, "1.31.1", map[string]string{"ROLE": "core"}, false},
	} {
		f := compile(t, "configPatches: [{applyTo: CLUSTER, match: "+tc.match+", patch: {operation: REMOVE}}]")
		p := f.Patches[0]
		if got := p.MatchesProxy(tc.version, md(tc.meta)); got != tc.want {
			t.Errorf("match %.60s, version %q, metadata %v: %v, want %v", tc.match, tc.version, tc.meta, got, tc.want)
		}
	}
	p := compile(t, `configPatches: [{applyTo: CLUSTER, match: {proxy: {proxyVersion: '^1\.2.*', metadata: {A: b}}}, patch: {operation: REMOVE}}]`).Patches[0]
	if !p.MatchesProxyVersion() || len(p.ProxyMetadataKeys()) != 1 || p.ProxyMetadataKeys()[0] != "A" {
		t.Errorf("MatchesProxyVersion %v, ProxyMetadataKeys %v", p.MatchesProxyVersion(), p.ProxyMetadataKeys())
	}
}
