package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// chainFilterNames lists, per filter chain of a listener in generic JSON
// (name#i, default chain "default"), its filters' names in order, network
// then each connection manager's HTTP filters ("hcm/NAME"), a reference
// taken from ECDS marked "*".
func chainFilterNames(l map[string]any) map[string][]string {
	out := map[string][]string{}
	seen := map[string]int{}
	chains, _ := l["filterChains"].([]any)
	if d, ok := l["defaultFilterChain"]; ok {
		chains = append(chains, d)
	}
	for i, c := range chains {
		fc, _ := c.(map[string]any)
		name, _ := fc["name"].(string)
		key := fmt.Sprintf("%s#%d", name, seen[name])
		if _, ok := l["defaultFilterChain"]; ok && i == len(chains)-1 {
			key = "default"
		}
		seen[name]++
		var names []string
		filters, _ := fc["filters"].([]any)
		for _, f := range filters {
			fm, _ := f.(map[string]any)
			n, _ := fm["name"].(string)
			if fm["configDiscovery"] != nil {
				n += "*"
			}
			names = append(names, n)
			tc, _ := fm["typedConfig"].(map[string]any)
			hfs, _ := tc["httpFilters"].([]any)
			for _, hf := range hfs {
				hm, _ := hf.(map[string]any)
				hn, _ := hm["name"].(string)
				if hm["configDiscovery"] != nil {
					hn += "*"
				}
				names = append(names, "hcm/"+hn)
			}
		}
		out[key] = names
	}
	return out
}

// wasmRefs are the ECDS filter references (full JSON) of a listener, by
// name.
func wasmRefs(l map[string]any, into map[string]any) {
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["configDiscovery"] != nil {
				into[x["name"].(string)] = x
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(l)
}

// TestWasmPluginMatchesIstiod (istiodref case wasm-basic: HTTP plugins in
// each phase with priorities 10, 1 and none on reviews, a namespace-wide
// AUTHZ plugin for SERVER only, a CLIENT plugin on port 9080 only, a
// root-namespace STATS plugin, a NETWORK plugin on ratings, a gateway
// plugin from a file, a pull secret, VM env, and a plugin of another
// namespace): every listener istiod sends the two sidecars and the
// gateway has, chain by chain, the same filters in the same order as
// pilotfish's (network filters and HTTP filters, the ECDS references in
// istiod's places), each reference equal field by field; and the ECDS
// resources pilotfish answers for the names the listeners reference equal
// istiod's field by field, but for ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION
// (istiod: the object's resourceVersion; pilotfish: its content hash, see
// docs/wasm.md). Every resource passes go-control-plane's validation.
func TestWasmPluginMatchesIstiod(t *testing.T) {
	c, err := istiodref.LoadCase("wasm-basic")
	if err != nil {
		t.Fatal(err)
	}
	refs, ecdsCompared := 0, 0
	var diffs []string
	eachRefProxy(t, c, caseEngine(t, c, Options{}), "", func(p *refProxy) {
		wantRefs, haveRefs := map[string]any{}, map[string]any{}
		p.eachListener(&diffs, func(name string, istiod, pilotfish map[string]any) {
			want, have := chainFilterNames(istiod), chainFilterNames(pilotfish)
			for chain, w := range want {
				if strings.Join(w, ",") != strings.Join(have[chain], ",") {
					diffs = append(diffs, fmt.Sprintf("%s/%s/%s filters:\n got %v\nwant %v", p.Name, name, chain, have[chain], w))
				}
			}
			if len(have) != len(want) {
				diffs = append(diffs, fmt.Sprintf("%s/%s: %d chains, istiod %d", p.Name, name, len(have), len(want)))
			}
			wasmRefs(istiod, wantRefs)
			wasmRefs(pilotfish, haveRefs)
		})
		var names []string
		for n, w := range wantRefs {
			names = append(names, n)
			refs++
			scenario.Diff(p.Name+"/ref "+n, w, haveRefs[n], &diffs)
		}
		// ECDS for the referenced names.
		ext, err := p.conn.Generate(TypeExtensionConfig, names, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]any{}
		for _, r := range ext {
			validateExtension(t, p.Name+"/"+r.Name, r.Any)
			have[r.Name] = withoutResourceVersion(t, anyJSON(t, r.Any))
		}
		want := istiodExtensions(t, c.ExtensionFile(p.Proxy))
		if len(want) != len(names) || len(have) != len(names) {
			t.Errorf("%s: %d names referenced, istiod answered %d, pilotfish %d", p.Name, len(names), len(want), len(have))
		}
		for n, w := range want {
			ecdsCompared++
			scenario.Diff(p.Name+"/ecds "+n, withoutResourceVersion(t, w), have[n], &diffs)
		}
	})
	for _, d := range diffs {
		t.Error(d)
	}
	if refs < 10 || ecdsCompared < 10 {
		t.Errorf("compared %d references and %d ECDS resources: the case lost its plugins", refs, ecdsCompared)
	}
	t.Logf("compared %d filter references and %d ECDS resources", refs, ecdsCompared)
}

// validateExtension validates an ECDS resource as Envoy receives it from
// istio-agent, which fetches the module and rewrites the VM's remote code
// to the local file (istiod's resources, like pilotfish's, have no sha256
// when the plugin sets none, which Envoy's RemoteDataSource would refuse),
// with a configuration Any left empty (no pluginConfig, as istiod sends
// it: Envoy reads its value as bytes, the validator resolves its type)
// removed.
func validateExtension(t *testing.T, what string, b []byte) {
	t.Helper()
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	var tec corev3.TypedExtensionConfig
	if err := a.UnmarshalTo(&tec); err != nil {
		t.Fatal(err)
	}
	m, err := tec.TypedConfig.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	cfg, ok := m.(interface{ GetConfig() *wasmv3.PluginConfig })
	if !ok {
		t.Fatalf("%s: %T is not a Wasm filter", what, m)
	}
	pc := cfg.GetConfig()
	if vm := pc.GetVmConfig(); vm.GetCode().GetRemote() != nil {
		vm.Code = &corev3.AsyncDataSource{Specifier: &corev3.AsyncDataSource_Local{Local: &corev3.DataSource{
			Specifier: &corev3.DataSource_Filename{Filename: "/var/lib/istio/data/module.wasm"}}}}
	}
	if pc.GetConfiguration().GetTypeUrl() == "" {
		pc.Configuration = nil
	}
	if err := xdstest.Validate(m); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// istiodExtensions reads the ECDS resources istiod sent a proxy, by name.
func istiodExtensions(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, r := range list {
		name, _ := r["name"].(string)
		delete(r, "@type") // the Any's; pilotfish's side is the message
		out[name] = r
	}
	return out
}

// withoutResourceVersion drops the value of the resource version variable
// of a TypedExtensionConfig in generic JSON (it must be set).
func withoutResourceVersion(t *testing.T, v any) any {
	t.Helper()
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	kv, _ := dig(m, "typedConfig", "config", "vmConfig", "environmentVariables", "keyValues").(map[string]any)
	if s, _ := kv["ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION"].(string); s == "" {
		t.Errorf("%v: no ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION", m["name"])
	}
	delete(kv, "ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION")
	return m
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}
