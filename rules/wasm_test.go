package rules

import (
	"fmt"
	"testing"

	extensions "istio.io/api/extensions/v1alpha1"
	typeapi "istio.io/api/type/v1beta1"
)

// TestWasmMatch: istiod's matchTrafficExtensionSelectors for the modes
// pilotfish's listeners have: no match selects everything; a selector
// selects its mode (CLIENT_AND_SERVER and unset: both) on its ports (none:
// every port); several selectors add up.
func TestWasmMatch(t *testing.T) {
	sel := func(mode typeapi.WorkloadMode, ports ...uint32) *extensions.WasmPlugin_TrafficSelector {
		s := &extensions.WasmPlugin_TrafficSelector{Mode: mode}
		for _, p := range ports {
			s.Ports = append(s.Ports, &typeapi.PortSelector{Number: p})
		}
		return s
	}
	tests := []struct {
		name  string
		match []*extensions.WasmPlugin_TrafficSelector
		mode  typeapi.WorkloadMode
		want  string // "all", or the ports
	}{
		{"no match", nil, typeapi.WorkloadMode_SERVER, "all"},
		{"mode unset, no ports", []*extensions.WasmPlugin_TrafficSelector{sel(typeapi.WorkloadMode_UNDEFINED)}, typeapi.WorkloadMode_CLIENT, "all"},
		{"other mode", []*extensions.WasmPlugin_TrafficSelector{sel(typeapi.WorkloadMode_CLIENT)}, typeapi.WorkloadMode_SERVER, "[]"},
		{"both modes, ports", []*extensions.WasmPlugin_TrafficSelector{sel(typeapi.WorkloadMode_CLIENT_AND_SERVER, 9080, 80)}, typeapi.WorkloadMode_SERVER, "[80 9080]"},
		{"selectors add up", []*extensions.WasmPlugin_TrafficSelector{sel(typeapi.WorkloadMode_SERVER, 9080), sel(typeapi.WorkloadMode_CLIENT, 80), sel(typeapi.WorkloadMode_SERVER, 8080, 9080)},
			typeapi.WorkloadMode_SERVER, "[8080 9080]"},
		{"a selector without ports wins", []*extensions.WasmPlugin_TrafficSelector{sel(typeapi.WorkloadMode_SERVER, 9080), sel(typeapi.WorkloadMode_SERVER)}, typeapi.WorkloadMode_SERVER, "all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all, ports := wasmMatch(&extensions.WasmPlugin{Match: tt.match}, tt.mode)
			got := fmt.Sprint(ports)
			if all {
				got = "all"
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	// The inbound side keeps a plugin's ports for each chain; a plugin for
	// the other mode only is not there at all.
	plugins := []wasmPlugin{
		{spec: &extensions.WasmPlugin{Match: []*extensions.WasmPlugin_TrafficSelector{sel(typeapi.WorkloadMode_SERVER, 9080)}}, name: "a"},
		{spec: &extensions.WasmPlugin{Match: []*extensions.WasmPlugin_TrafficSelector{sel(typeapi.WorkloadMode_CLIENT)}}, name: "b"},
		{spec: &extensions.WasmPlugin{Type: extensions.PluginType_NETWORK, Phase: extensions.PluginPhase_AUTHZ}, name: "c"},
	}
	got := fmt.Sprintf("%+v", wasmServer(plugins))
	if want := "[{Name:a Phase:0 Network:false AllPorts:false Ports:[9080]} {Name:c Phase:2 Network:true AllPorts:true Ports:[]}]"; got != want {
		t.Errorf("server side:\n got %s\nwant %s", got, want)
	}
	if got := fmt.Sprintf("%+v", wasmClient(plugins, 80)); got != "[{Name:b Phase:0 Network:false AllPorts:true Ports:[]} {Name:c Phase:2 Network:true AllPorts:true Ports:[]}]" {
		t.Errorf("client side on 80: %s", got)
	}
}
