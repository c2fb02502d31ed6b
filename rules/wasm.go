package rules

import (
	"slices"

	extensions "istio.io/api/extensions/v1alpha1"
	typeapi "istio.io/api/type/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TypeExtensionConfig is the type URL of ECDS resources.
const TypeExtensionConfig = encode.ExtensionConfigType

// wasmPlugin is a WasmPlugin that applies to a class.
type wasmPlugin struct {
	row  *index.Config
	spec *extensions.WasmPlugin
	name string // the ECDS resource name
}

// wasmPlugins are the WasmPlugins that apply to the scope's proxies in
// istiod's order (TrafficExtensionsByListenerInfo): those of the proxy's
// namespace, then the root namespace's, each oldest first, then stably by
// priority, highest first (unset: math.MinInt32). Selection is istiod's
// ShouldAttachPolicy (attaches: by selector, or by targetRefs for a
// Gateway API gateway). nil when the snapshot has no WasmPlugin: the
// listener keys then hold no plugin and are those of a mesh without them.
func wasmPlugins(sc *Scope, mesh *encode.Mesh) []wasmPlugin {
	snap := sc.Snapshot
	if snap.NumConfigs(index.ConfigWasmPlugin) == 0 {
		return nil
	}
	root, _ := snap.Symbols.Lookup(mesh.RootNamespace)
	labels := scopeLabels(sc)
	var out []wasmPlugin
	add := func(space index.Sym) {
		for _, c := range sortedConfigs(snap, index.ConfigWasmPlugin, space) {
			wp, ok := c.Spec.(*extensions.WasmPlugin)
			if ok && attaches(snap, c, sc.Namespace, labels) {
				out = append(out, wasmPlugin{row: c, spec: wp, name: encode.WasmResourceName(snap.String(c.Key.Namespace), snap.String(c.Key.Name))})
			}
		}
	}
	add(sc.Namespace)
	if root != sc.Namespace {
		add(root)
	}
	slices.SortStableFunc(out, func(a, b wasmPlugin) int {
		switch {
		case a.row.Priority > b.row.Priority:
			return -1
		case a.row.Priority < b.row.Priority:
			return 1
		}
		return 0
	})
	return out
}

// wasmForPort are the filter references of the plugins whose match selects
// mode on port (istiod's matchTrafficExtensionSelectors): no match, or a
// selector of the mode (CLIENT_AND_SERVER and unset match both) listing
// the port or no port. A router's listeners take mode CLIENT, as istiod's.
func wasmForPort(plugins []wasmPlugin, mode typeapi.WorkloadMode, port uint32) encode.WasmFilters {
	var out encode.WasmFilters
	for i := range plugins {
		p := &plugins[i]
		all, ports := wasmMatch(p.spec, mode)
		if all || slices.Contains(ports, port) {
			out = append(out, wasmRef(p, true, nil))
		}
	}
	return out
}

// wasmServer are the references of the plugins for the inbound side (mode
// SERVER), each with the ports it is limited to: the virtual inbound
// listener's chains take each the references of its port.
func wasmServer(plugins []wasmPlugin) encode.WasmFilters {
	var out encode.WasmFilters
	for i := range plugins {
		p := &plugins[i]
		all, ports := wasmMatch(p.spec, typeapi.WorkloadMode_SERVER)
		if all || len(ports) > 0 {
			out = append(out, wasmRef(p, all, ports))
		}
	}
	return out
}

// wasmMatch returns whether wp's match selects mode on every port, else
// the ports it selects mode on (none: the plugin does not apply).
func wasmMatch(wp *extensions.WasmPlugin, mode typeapi.WorkloadMode) (all bool, ports []uint32) {
	if len(wp.GetMatch()) == 0 {
		return true, nil
	}
	for _, m := range wp.GetMatch() {
		switch m.GetMode() {
		case typeapi.WorkloadMode_UNDEFINED, typeapi.WorkloadMode_CLIENT_AND_SERVER, mode:
		default:
			continue
		}
		if len(m.GetPorts()) == 0 {
			return true, nil
		}
		for _, ps := range m.GetPorts() {
			if n := ps.GetNumber(); n != 0 && !slices.Contains(ports, n) {
				ports = append(ports, n)
			}
		}
	}
	slices.Sort(ports)
	return false, ports
}

func wasmRef(p *wasmPlugin, all bool, ports []uint32) encode.WasmFilter {
	return encode.WasmFilter{
		Name:     p.name,
		Phase:    encode.WasmPhase(p.spec.GetPhase()),
		Network:  p.spec.GetType() == extensions.PluginType_NETWORK,
		AllPorts: all,
		Ports:    ports,
	}
}

// extensionSource answers one ECDS name it recognises (ok true), appending
// its resource to dst when the class may have it; ok false leaves the name
// to the next source.
type extensionSource func(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, name string, dst []Resource) (out []Resource, ok bool, err error)

// extensionSources are ECDS's sources, tried in turn for each name: the
// class's EnvoyFilter EXTENSION_CONFIG patches (envoyfilter_ecds.go), then
// the WasmPlugins', in istiod's order (BuildExtensionConfiguration).
var extensionSources = []extensionSource{envoyFilterExtension, wasmExtension}

// buildExtensionConfigs answers ECDS by name through extensionSources; a
// name no source answers is left out. ECDS is never wildcard.
func buildExtensionConfigs(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	for _, n := range names {
		for _, src := range extensionSources {
			out, ok, err := src(sc, mesh, cache, n, dst)
			if err != nil {
				return out, err
			}
			if ok {
				dst = out
				break
			}
		}
	}
	return dst, nil
}

// wasmExtension answers a WasmPlugin's ECDS name: its extension config,
// looked up as istiod does by namespace and name among the plugins of the
// proxy's namespace and the root namespace (whatever their selectors: a
// proxy asks for what its listeners reference).
//
// The resource is the shared one, its pull secret variable empty, as
// istiod sends it to a proxy without a verified identity; an authenticated
// stream's copy gets the Secret's content from WithPullSecrets
// (wasm_secret.go, docs/wasm.md).
func wasmExtension(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, n string, dst []Resource) ([]Resource, bool, error) {
	ns, name, ok := encode.ParseWasmResourceName(n)
	if !ok {
		return dst, false, nil
	}
	snap := sc.Snapshot
	if snap.NumConfigs(index.ConfigWasmPlugin) == 0 {
		return dst, true, nil
	}
	root, _ := snap.Symbols.Lookup(mesh.RootNamespace)
	nsSym, ok1 := snap.Symbols.Lookup(ns)
	nameSym, ok2 := snap.Symbols.Lookup(name)
	if !ok1 || !ok2 || (nsSym != sc.Namespace && nsSym != root) {
		return dst, true, nil
	}
	c, found := snap.Config(index.ConfigWasmPlugin, index.ConfigKey{Namespace: nsSym, Name: nameSym})
	if !found {
		return dst, true, nil
	}
	out, err := appendResource(dst, cache, snap.Names(), &encode.ExtensionConfigKey{Plugin: c}, encode.ExtensionConfigGen)
	return out, true, err
}

// wasmClient are the references on a listener of port of a sidecar's
// outbound side or a router (mode CLIENT).
func wasmClient(plugins []wasmPlugin, port uint32) encode.WasmFilters {
	if len(plugins) == 0 {
		return nil
	}
	return wasmForPort(plugins, typeapi.WorkloadMode_CLIENT, port)
}
