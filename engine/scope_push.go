package engine

import (
	"strings"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// scopedChanges is a full change described by keys a scope can rule out
// (security policies by namespace and selector, scope_policy.go):
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
			index.ConfigSidecar:
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
func (s *scopedChanges) affects(prev, cur *Scope, rootNS string) bool {
	if s == nil || prev == nil {
		return true
	}
	for _, sc := range [2]*Scope{prev, cur} {
		for k := range s.services {
			if sc.holdsService(k) {
				return true
			}
		}
		for c := range s.configs {
			if c.kind == index.ConfigSidecar {
				if sc.holdsSidecar(c.key) { // sidecar.go
					return true
				}
				continue
			}
			if isSecurityKind(c.kind) {
				if sc.holdsPolicy(c.kind, c.key, rootNS) {
					return true
				}
				continue
			}
			if sc.holdsConfig(c.kind, c.key) {
				return true
			}
		}
	}
	return false
}

// holdsService reports whether the scope sees the service or backs it.
func (sc *Scope) holdsService(k index.ServiceKey) bool {
	if id, ok := sc.ByHost[k.Host]; ok && sc.Snapshot.ServiceByID(id).Key == k {
		return true
	}
	for i := range sc.Instances {
		if sc.Instances[i].Service.Key == k {
			return true
		}
	}
	return false
}

// holdsConfig reports whether a VirtualService, DestinationRule or
// ServiceEntry, as it is in the scope's snapshot, can matter to the scope:
// a VirtualService visible to it that its egress imports, or a rule or
// entry for a host it sees. A config absent from the snapshot matters to no scope of it (the
// other snapshot of the pair has it, if any).
func (sc *Scope) holdsConfig(kind index.ConfigKind, key index.ConfigKey) bool {
	c, ok := sc.Snapshot.Config(kind, key)
	if !ok {
		return false
	}
	if kind == index.ConfigVirtualService {
		return c.ExportTo.VisibleTo(c.Key.Namespace, sc.Namespace) && sc.Egress.seesConfig(sc.Snapshot, c)
	}
	for _, h := range c.Hosts {
		if _, ok := sc.ByHost[h]; ok || strings.HasPrefix(sc.Snapshot.String(h), "*") {
			return true // a wildcard rule cannot be ruled out cheaply
		}
	}
	return false
}

// scopedTargets keeps the classes a full change may affect, and records
// each class's current scope as the one its proxies were last pushed from.
func (e *Engine) scopedTargets(classes []*class, changes *scopedChanges) []*class {
	out := classes[:0]
	for _, cl := range classes {
		cur := cl.scope(e)
		prev := cl.pushed.Swap(cur)
		repush := cl.repush
		cl.repush = false
		if repush || cl.key.class.Type == encode.ProxyGRPC || changes.affects(prev, cur, e.mesh.RootNamespace) {
			out = append(out, cl)
		}
	}
	return out
}
