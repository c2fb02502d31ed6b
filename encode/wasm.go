package encode

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// WasmPhase is a WasmPlugin's phase: where istiod inserts its filter
// reference among the authentication, authorization and stats filters.
// The values are the API's (PluginPhase).
type WasmPhase uint8

const (
	WasmPhaseUnspecified WasmPhase = 0 // after the stats phase
	WasmPhaseAuthn       WasmPhase = 1 // before authentication (jwt_authn)
	WasmPhaseAuthz       WasmPhase = 2 // before authorization (RBAC)
	WasmPhaseStats       WasmPhase = 3 // after authorization
)

// WasmFilter is one WasmPlugin's filter reference, as a listener holds
// it: the filter's configuration comes from ECDS under Name
// (ExtensionConfigKey).
type WasmFilter struct {
	// Name is the ECDS resource name (WasmResourceName).
	Name  string
	Phase WasmPhase
	// Network: a network filter (type NETWORK); else an HTTP filter.
	Network bool
	// AllPorts: the filter applies to every port of the listener; else
	// only to Ports (a virtual inbound listener's chains, whose plugins
	// rules chooses by mode only). Rules resolves ports itself for a
	// listener of one port, leaving AllPorts set.
	AllPorts bool
	Ports    []uint32
}

// WasmFilters are the filter references of one listener in istiod's
// order: by phase where the filters are inserted, within a phase highest
// priority first, then the proxy's namespace before the root namespace,
// then oldest first. Empty: no plugin applies (the listener's bytes are
// those without WasmPlugins).
type WasmFilters []WasmFilter

func (w WasmFilters) hash(h *Hasher) {
	h.Int(len(w))
	for i := range w {
		f := &w[i]
		h.Str(f.Name)
		h.U32(uint32(f.Phase))
		h.Bool(f.Network)
		h.Bool(f.AllPorts)
		h.Int(len(f.Ports))
		for _, p := range f.Ports {
			h.U32(p)
		}
	}
}

func (f *WasmFilter) onPort(port uint32) bool {
	if f.AllPorts {
		return true
	}
	for _, p := range f.Ports {
		if p == port {
			return true
		}
	}
	return false
}

// Type URLs a filter reference accepts, as istiod lists them: the Wasm
// filter, and RBAC (what istio-agent substitutes, denying all, when it
// cannot fetch a fail-closed module).
var (
	wasmHTTPTypeURLs = []string{
		"type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
		"type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
	}
	wasmNetworkTypeURLs = []string{
		"type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm",
		"type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC",
	}
	// wasmConfigSource is ADS with no initial fetch timeout: Envoy waits
	// for the extension config before the listener serves, since a plugin
	// may enforce security.
	wasmConfigSource = &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
		ResourceApiVersion:    core.ApiVersion_V3,
		InitialFetchTimeout:   durationpb.New(0),
	}
)

// appendHTTP appends the HTTP filter references of phase that apply on
// port (0: a chain of no one port, such as a passthrough chain).
func (w WasmFilters) appendHTTP(dst []*hcm.HttpFilter, phase WasmPhase, port uint32) []*hcm.HttpFilter {
	for i := range w {
		f := &w[i]
		if f.Network || f.Phase != phase || !f.onPort(port) {
			continue
		}
		dst = append(dst, &hcm.HttpFilter{Name: f.Name, ConfigType: &hcm.HttpFilter_ConfigDiscovery{
			ConfigDiscovery: &core.ExtensionConfigSource{ConfigSource: wasmConfigSource, TypeUrls: wasmHTTPTypeURLs},
		}})
	}
	return dst
}

// appendNet appends the network filter references of phase that apply on
// port.
func (w WasmFilters) appendNet(dst []*listener.Filter, phase WasmPhase, port uint32) []*listener.Filter {
	for i := range w {
		f := &w[i]
		if !f.Network || f.Phase != phase || !f.onPort(port) {
			continue
		}
		dst = append(dst, &listener.Filter{Name: f.Name, ConfigType: &listener.Filter_ConfigDiscovery{
			ConfigDiscovery: &core.ExtensionConfigSource{ConfigSource: wasmConfigSource, TypeUrls: wasmNetworkTypeURLs},
		}})
	}
	return dst
}

// hasNet reports whether any network filter applies on port.
func (w WasmFilters) hasNet(port uint32) bool {
	for i := range w {
		if w[i].Network && w[i].onPort(port) {
			return true
		}
	}
	return false
}

// httpAround is an HTTP filter list with the plugins' references in
// istiod's places: custom (ext_authz), AUTHN, authn (jwt_authn), AUTHZ,
// authz (RBAC), STATS, UNSPECIFIED.
func (w WasmFilters) httpAround(port uint32, custom []*hcm.HttpFilter, authn *hcm.HttpFilter, authz []*hcm.HttpFilter) []*hcm.HttpFilter {
	out := make([]*hcm.HttpFilter, 0, len(custom)+len(authz)+1+len(w))
	out = append(out, custom...)
	out = w.appendHTTP(out, WasmPhaseAuthn, port)
	if authn != nil {
		out = append(out, authn)
	}
	out = w.appendHTTP(out, WasmPhaseAuthz, port)
	out = append(out, authz...)
	out = w.appendHTTP(out, WasmPhaseStats, port)
	return w.appendHTTP(out, WasmPhaseUnspecified, port)
}

// netAround is a network filter list with the plugins' references in
// istiod's places: custom (ext_authz), AUTHN, AUTHZ, authz (RBAC), STATS,
// UNSPECIFIED.
func (w WasmFilters) netAround(dst []*listener.Filter, port uint32, custom, authz []*listener.Filter) []*listener.Filter {
	dst = append(dst, custom...)
	dst = w.appendNet(dst, WasmPhaseAuthn, port)
	dst = w.appendNet(dst, WasmPhaseAuthz, port)
	dst = append(dst, authz...)
	dst = w.appendNet(dst, WasmPhaseStats, port)
	return w.appendNet(dst, WasmPhaseUnspecified, port)
}
