package engine

import (
	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// scopedChanges is a full change described by keys a scope can rule out
// (security policies and EnvoyFilters by namespace and selector,
// rules/scope_policy.go, rules/envoyfilter.go):
// a class none of whose scopes (before and after) holds one of them gets no
// push. This is what makes Sidecar scoping a performance feature: a proxy
// limited to its namespace is not pushed to, and generates nothing, when
// another namespace changes.
type scopedChanges struct {
	services map[index.ServiceKey]struct{}
	configs  map[scopedConfig]struct{}
}

type scopedConfig struct {
	kind index.ConfigKind
	key  index.ConfigKey
}

// add merges cs into s; the result is nil (anything may have changed) when
// cs touches something else, or when an earlier full change did (hadFull
// with s nil).
func (s *scopedChanges) add(cs *index.ChangeSet, hadFull bool) *scopedChanges {
	if hadFull && s == nil {
		return nil
	}
	if len(cs.Namespaces) > 0 || len(cs.Workloads) > 0 {
		return nil
	}
	for kind, keys := range cs.Configs {
		switch index.ConfigKind(kind) {
		case index.ConfigVirtualService, index.ConfigDestinationRule, index.ConfigServiceEntry,
			index.ConfigPeerAuthentication, index.ConfigAuthorizationPolicy, index.ConfigRequestAuthentication,
			index.ConfigSidecar, index.ConfigJWKS, index.ConfigWasmPlugin, index.ConfigEnvoyFilter:
		default:
			if len(keys) > 0 {
				return nil
			}
		}
	}
	if s == nil {
		s = &scopedChanges{services: map[index.ServiceKey]struct{}{}, configs: map[scopedConfig]struct{}{}}
	}
	for _, k := range cs.Services {
		s.services[k] = struct{}{}
	}
	for _, k := range cs.Endpoints {
		s.services[k] = struct{}{}
	}
	for kind, keys := range cs.Configs {
		for _, k := range keys {
			s.configs[scopedConfig{index.ConfigKind(kind), k}] = struct{}{}
		}
	}
	return s
}

// affects reports whether a full change may alter what a class's proxies
// receive, given its scope at the last push (prev, nil if none) and now.
func (s *scopedChanges) affects(prev, cur *rules.Scope, rootNS string) bool {
	if s == nil || prev == nil {
		return true
	}
	for _, sc := range [2]*rules.Scope{prev, cur} {
		for k := range s.services {
			if sc.HoldsService(k) {
				return true
			}
		}
		for c := range s.configs {
			if c.kind == index.ConfigSidecar {
				if sc.HoldsSidecar(c.key) { // rules/sidecar.go
					return true
				}
				continue
			}
			if c.kind == index.ConfigJWKS { // a fetched key set: rules/authn_jwks.go
				if sc.HoldsJWKS(c.key, rootNS) {
					return true
				}
				continue
			}
			if c.kind == index.ConfigEnvoyFilter { // rules/envoyfilter.go
				if sc.HoldsEnvoyFilter(c.key, rootNS) {
					return true
				}
				continue
			}
			// A WasmPlugin reaches proxies as a security policy does: by
			// namespace (root: all) and selector.
			if rules.IsSecurityKind(c.kind) || c.kind == index.ConfigWasmPlugin {
				if sc.HoldsPolicy(c.kind, c.key, rootNS) {
					return true
				}
				continue
			}
			if sc.HoldsConfig(c.kind, c.key) {
				return true
			}
		}
	}
	return false
}

// scopedTargets keeps the classes a full change may affect, and records
// each class's current scope as the one its proxies were last pushed from.
func (e *Engine) scopedTargets(classes []*class, changes *scopedChanges) []*class {
	if changes.touchesExtAuthz(e.Snapshot(), e.meshNow().mesh) || changes.touchesTracing(e.Snapshot(), e.meshNow().mesh) { // mesh_extauthz.go, mesh_tracing.go
		changes = nil
	}
	out := classes[:0]
	for _, cl := range classes {
		cur := cl.scope(e)
		prev := cl.pushed.Swap(cur)
		repush := cl.repush
		cl.repush = false
		if repush || cl.key.class.Type == encode.ProxyGRPC || changes.affects(prev, cur, e.meshNow().mesh.RootNamespace) {
			out = append(out, cl)
		}
	}
	return out
}

// classMove is a connection reclassify moved between classes.
type classMove struct {
	from, to *class
	created  bool // to was made for this move
}

// settleMoves decides, for connections reclassify moved, whether their new
// class must be pushed. A security policy whose selector names a new label
// key re-keys every class of its namespace with that key (their Labels
// change) without changing the config of those the policy does not
// select. A move that changes only Labels keeps the old class's pushed
// scope as what the connection holds, and is pushed only when the change
// set affects that scope or the new one; any other move (Sidecar,
// instances, Gateways) and a class never pushed push as before.
func (e *Engine) settleMoves(moves []classMove, changes *scopedChanges) {
	for _, m := range moves {
		if m.to.repush {
			continue
		}
		prev := m.from.pushed.Load()
		if prev == nil || changes == nil || !labelsOnly(m.from.key, m.to.key) ||
			changes.affects(prev, m.to.scope(e), e.meshNow().mesh.RootNamespace) {
			m.to.repush = true
			continue
		}
		if m.created {
			m.to.pushed.CompareAndSwap(nil, prev)
		}
	}
}

// labelsOnly reports whether two class keys differ in nothing but Labels.
func labelsOnly(a, b classKey) bool {
	a.class.Labels = b.class.Labels
	return a == b
}
