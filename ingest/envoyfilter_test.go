package ingest_test

import (
	"errors"
	"strings"
	"testing"

	envoy_lua "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// luaFilter is an HTTP_FILTER patch as public examples write it: a Lua
// filter inserted before the router of inbound HTTP connection managers.
const luaFilter = `workloadSelector: {labels: {app: reviews}}
priority: -5
configPatches:
- applyTo: HTTP_FILTER
  match:
    context: SIDECAR_INBOUND
    proxy: {proxyVersion: '^1\.3.*'}
    listener:
      portNumber: 9080
      filterChain:
        filter:
          name: envoy.filters.network.http_connection_manager
          subFilter: {name: envoy.filters.http.router}
  patch:
    operation: INSERT_BEFORE
    value:
      name: envoy.lua
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
        defaultSourceCode: {inlineString: "function envoy_on_request(h) end"}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {service: reviews.shop.svc.cluster.local}}
  patch: {operation: MERGE, value: {connect_timeout: 3s, unknownNewField: 1}}
- applyTo: NETWORK_FILTER
  match: {listener: {filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}}
  patch: {operation: REMOVE}
`

func ef(spec string) string { return doc("EnvoyFilter", "lua", spec) }

// TestValidateEnvoyFilter checks istiod's EnvoyFilter rules
// (pkg/config/validation/envoyfilter), each error naming its field.
func TestValidateEnvoyFilter(t *testing.T) {
	patch := func(applyTo, match, p string) string {
		return ef("configPatches:\n- applyTo: " + applyTo + "\n  match: " + match + "\n  patch: " + p)
	}
	runRules(t, []ruleCase{
		{"public example ok", ef(luaFilter), ""},
		{"no patches ok", ef("priority: 3"), ""},
		{"applyTo required", ef("configPatches: [{patch: {operation: REMOVE}}]"), "spec.configPatches[0].applyTo: required"},
		{"patch required", ef("configPatches: [{applyTo: CLUSTER}]"), "spec.configPatches[0].patch: required"},
		{"operation required", ef("configPatches: [{applyTo: CLUSTER, patch: {value: {name: x}}}]"), "spec.configPatches[0].patch.operation: required"},
		{"value required", ef("configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE}}]"), "spec.configPatches[0].patch.value: required for operation MERGE"},
		{"remove needs no value", ef("configPatches: [{applyTo: CLUSTER, patch: {operation: REMOVE}}]"), ""},
		{"proxy version regex", patch("CLUSTER", "{proxy: {proxyVersion: '1.(2'}}", "{operation: REMOVE}"), "spec.configPatches[0].match.proxy.proxyVersion: invalid regular expression"},
		{"listener class needs listener match", patch("HTTP_FILTER", "{cluster: {service: a}}", "{operation: REMOVE}"), "spec.configPatches[0].match: applyTo HTTP_FILTER needs a listener match"},
		{"route class needs route match", patch("VIRTUAL_HOST", "{listener: {portNumber: 80}}", "{operation: REMOVE}"), "spec.configPatches[0].match: applyTo VIRTUAL_HOST needs a routeConfiguration match"},
		{"cluster needs cluster match", patch("CLUSTER", "{listener: {portNumber: 80}}", "{operation: REMOVE}"), "spec.configPatches[0].match: applyTo CLUSTER needs a cluster match"},
		{"filter match needs a name", patch("NETWORK_FILTER", "{listener: {filterChain: {filter: {subFilter: {name: a}}}}}", "{operation: REMOVE}"), "spec.configPatches[0].match.listener.filterChain.filter.name: required in a filter match"},
		{"sub-filter only for HTTP_FILTER", patch("NETWORK_FILTER", "{listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: a}}}}}", "{operation: REMOVE}"), "filter.subFilter: only applyTo HTTP_FILTER may match a sub-filter"},
		{"sub-filter needs the HCM", patch("HTTP_FILTER", "{listener: {filterChain: {filter: {name: envoy.filters.network.tcp_proxy, subFilter: {name: a}}}}}", "{operation: REMOVE}"), `filter.name: a sub-filter match needs the filter envoy.filters.network.http_connection_manager, not "envoy.filters.network.tcp_proxy"`},
		{"deprecated HCM name ok", patch("HTTP_FILTER", "{listener: {filterChain: {filter: {name: envoy.http_connection_manager, subFilter: {name: a}}}}}", "{operation: REMOVE}"), ""},
		{"sub-filter needs a name", patch("HTTP_FILTER", "{listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {}}}}}", "{operation: REMOVE}"), "filter.subFilter.name: required in a sub-filter match"},
		{"value of the wrong type", patch("CLUSTER", "{context: ANY}", "{operation: MERGE, value: {connect_timeout: {a: 1}}}"), "spec.configPatches[0].patch.value: not a *clusterv3.Cluster"},
		{"unknown Any type", patch("HTTP_FILTER", "{context: ANY}", "{operation: INSERT_FIRST, value: {name: x, typed_config: {'@type': type.googleapis.com/envoy.config.filter.http.lua.v2.Lua}}}"), "spec.configPatches[0].patch.value: not a *http_connection_managerv3.HttpFilter: referenced type unknown"},
		{"selector labels", ef("workloadSelector: {labels: {app: 'a*'}}"), "spec.workloadSelector.labels[app]: wildcard is not supported in a selector"},
		{"selector or targetRefs", ef("workloadSelector: {labels: {app: a}}\ntargetRefs: [{kind: Service, group: '', name: a}]"), "spec: set only one of workloadSelector and targetRefs"},
		{"targetRef kind", ef("targetRefs: [{kind: Pod, group: '', name: a}]"), "spec.targetRefs[0].kind: cannot target /Pod"},
		{"waypoint patches not checked", ef("configPatches: [{match: {context: WAYPOINT}}]"), ""},
	})
}

// extensionFilter adds an EXTENSION_CONFIG patch (served over ECDS) to
// luaFilter's.
const extensionFilter = luaFilter + `- applyTo: EXTENSION_CONFIG
  patch:
    operation: ADD
    value:
      name: ext.lua
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
        defaultSourceCode: {inlineString: "function envoy_on_request(h) end"}
`

// TestEnvoyFilterWarning checks that an EnvoyFilter whose patches are all
// applied, EXTENSION_CONFIG (served over ECDS) included, gets no warning
// from any consumer of the ledger.
func TestEnvoyFilterWarning(t *testing.T) {
	if _, errs, warns := ingest.DecodeWithWarnings("ef.yaml", []byte(ef(luaFilter))); len(errs)+len(warns) > 0 {
		t.Fatalf("applied patches: errors %s, warnings %s", errStrings(errs), errStrings(warns))
	}
	in := ef(extensionFilter)
	objs, errs, warns := ingest.DecodeWithWarnings("ef.yaml", []byte(in))
	if len(errs) > 0 || len(objs) != 1 {
		t.Fatalf("decode: %d objects, errors:\n%s", len(objs), errStrings(errs))
	}
	if objs[0].Kind != ingest.KindEnvoyFilter {
		t.Fatalf("kind %v, want EnvoyFilter", objs[0].Kind)
	}
	if len(warns) != 0 {
		t.Fatalf("an EXTENSION_CONFIG patch: warnings:\n%s", errStrings(warns))
	}
	// The Kubernetes source and the webhook call Unsupported after Validate.
	if got := ingest.Unsupported(&objs[0]); len(got) != 0 {
		t.Errorf("Unsupported: %s", errStrings(got))
	}
	// Without patches an EnvoyFilter does nothing in istiod either: no warning.
	if _, _, warns := ingest.DecodeWithWarnings("ef.yaml", []byte(ef("priority: 1"))); len(warns) != 0 {
		t.Errorf("EnvoyFilter without patches: %s", errStrings(warns))
	}
	// Only v1alpha3 exists.
	_, errs = ingest.Decode("ef.yaml", []byte(strings.Replace(in, "v1alpha3", "v1", 1)))
	if len(errs) != 1 || !errors.Is(errs[0], ingest.ErrVersion) {
		t.Errorf("EnvoyFilter at v1: %s", errStrings(errs))
	}
}

// TestPatchValue checks the conversion of patch values to typed Envoy
// messages (envoypatch.Value, which validation and conversion use): Anys resolved, fields unknown to pilotfish's Envoy API dropped
// as istiod does, REMOVE's nil value.
func TestPatchValue(t *testing.T) {
	objs, errs := ingest.Decode("ef.yaml", []byte(ef(luaFilter)))
	if len(errs) > 0 {
		t.Fatal(errStrings(errs))
	}
	cps := objs[0].Spec.(*networking.EnvoyFilter).GetConfigPatches()
	m, err := envoypatch.Value(cps[0].GetApplyTo(), cps[0].GetPatch().GetValue())
	if err != nil {
		t.Fatal(err)
	}
	hf, ok := m.(*hcm.HttpFilter)
	if !ok || hf.GetName() != "envoy.lua" {
		t.Fatalf("HTTP_FILTER value: %T %v", m, m)
	}
	var lua envoy_lua.Lua
	if err := hf.GetTypedConfig().UnmarshalTo(&lua); err != nil || lua.GetDefaultSourceCode().GetInlineString() != "function envoy_on_request(h) end" {
		t.Errorf("typed_config: %v %v", err, &lua)
	}
	m, err = envoypatch.Value(cps[1].GetApplyTo(), cps[1].GetPatch().GetValue())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.ProtoReflect().Descriptor().FullName(); got != "envoy.config.cluster.v3.Cluster" {
		t.Errorf("CLUSTER value: %s", got)
	}
	if m, err := envoypatch.Value(cps[2].GetApplyTo(), nil); m != nil || err != nil {
		t.Errorf("REMOVE: %v %v", m, err)
	}
}

// FuzzEnvoyFilter feeds arbitrary EnvoyFilter specs to Decode, Validate,
// Unsupported and envoypatch.Value: none may panic, and every problem is an
// *ingest.Error.
func FuzzEnvoyFilter(f *testing.F) {
	f.Add(luaFilter)
	f.Add("configPatches: [{applyTo: EXTENSION_CONFIG, patch: {operation: ADD, value: {name: x, typed_config: {'@type': type.googleapis.com/udpa.type.v1.TypedStruct}}}}]")
	f.Add("configPatches: [{applyTo: LISTENER_FILTER, match: {listener: {listenerFilter: a}}, patch: {operation: INSERT_FIRST, value: {name: a}}}]")
	f.Add("configPatches: [{applyTo: ROUTE_CONFIGURATION, match: {routeConfiguration: {vhost: {name: a, route: {action: ROUTE}}}}, patch: {operation: MERGE, value: {virtual_hosts: [{}]}}}]")
	f.Fuzz(func(t *testing.T, spec string) {
		objs, errs := ingest.Decode("f.yaml", []byte(ef(spec)))
		for _, e := range errs {
			asError(t, e)
		}
		for i := range objs {
			for _, e := range ingest.Validate(&objs[i]) {
				asError(t, e)
			}
			for _, e := range ingest.Unsupported(&objs[i]) {
				asError(t, e)
			}
			if s, ok := objs[i].Spec.(*networking.EnvoyFilter); ok {
				for _, cp := range s.GetConfigPatches() {
					_, _ = envoypatch.Value(cp.GetApplyTo(), cp.GetPatch().GetValue())
				}
			}
		}
	})
}
