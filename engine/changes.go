package engine

import (
	"strings"
	"sync"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// changeAccumulator merges change sets between pushes. The index writer
// adds to it (without blocking); the engine's run loop drains it.
type changeAccumulator struct {
	mu      sync.Mutex
	pending pendingChanges // guarded by mu
	wake    chan struct{}  // cap 1
	// failoverKeys is the last snapshot's rules.FailoverLabelKeys, joined:
	// classes keep those label keys, so a change re-keys them.
	failoverKeys string // guarded by mu
}

// pendingChanges is what happened since the last push.
type pendingChanges struct {
	// full: something other than endpoints changed.
	full bool
	// instances: services or workloads changed, so proxies' own service
	// instances (and thus their classes) may have changed.
	instances bool
	endpoints map[index.ServiceKey]struct{}
	// scoped lists what a full change touched when every part of it is
	// something a scope can rule out (services, VirtualServices,
	// DestinationRules, ServiceEntries); nil with full set means anything
	// may have changed (see affects in scope_push.go).
	scoped *scopedChanges
	first  time.Time
	last   time.Time
	events int

	// secrets are the changed Secret rows, which push SDS only
	// (build_sds_push.go).
	secrets map[index.ConfigKey]struct{}
}

func (a *changeAccumulator) init() { a.wake = make(chan struct{}, 1) }

func (a *changeAccumulator) add(snap *index.Snapshot, cs *index.ChangeSet) {
	now := time.Now()
	fkeys, drChanged := "", len(cs.Configs[index.ConfigDestinationRule]) > 0
	if drChanged && snap != nil {
		fkeys = strings.Join(rules.FailoverLabelKeys(snap), "\n")
	}
	a.mu.Lock()
	p := &a.pending
	if p.events == 0 {
		p.first = now
	}
	p.last = now
	p.events++
	rest, hadSecrets := withoutSecrets(cs, &p.secrets)
	if !(hadSecrets && rest.Empty()) && !endpointsOnly(rest) {
		p.scoped = p.scoped.add(rest, p.full)
		p.full = true
	}
	// Sidecars, Gateways, security policies, WasmPlugins, EnvoyFilters (whose
	// patch proxy matches classes also keep) and DestinationRules with a
	// workloadSelector select proxies by labels, and failoverPriority
	// lists name labels classes keep: they change classes.
	failoverKeysChanged := drChanged && (snap == nil || fkeys != a.failoverKeys)
	if drChanged && snap != nil {
		a.failoverKeys = fkeys
	}
	if failoverKeysChanged || len(cs.Services) > 0 || len(cs.Workloads) > 0 ||
		len(cs.Configs[index.ConfigSidecar]) > 0 || len(cs.Configs[index.ConfigGateway]) > 0 ||
		len(cs.Configs[index.ConfigPeerAuthentication]) > 0 || len(cs.Configs[index.ConfigAuthorizationPolicy]) > 0 ||
		len(cs.Configs[index.ConfigRequestAuthentication]) > 0 || len(cs.Configs[index.ConfigWasmPlugin]) > 0 ||
		len(cs.Configs[index.ConfigEnvoyFilter]) > 0 ||
		selectorRuleChanged(snap, cs) {
		p.instances = true
	}
	if len(cs.Endpoints) > 0 {
		if p.endpoints == nil {
			p.endpoints = make(map[index.ServiceKey]struct{}, len(cs.Endpoints))
		}
		for _, k := range cs.Endpoints {
			p.endpoints[k] = struct{}{}
		}
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// peek returns the times and kind of what is pending without taking it.
func (a *changeAccumulator) peek() (events int, first, last time.Time, full bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pending.events, a.pending.first, a.pending.last, a.pending.full
}

func (a *changeAccumulator) take() pendingChanges {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.pending
	a.pending = pendingChanges{}
	return p
}

// selectorRuleChanged reports whether a DestinationRule with a
// workloadSelector (whose label keys are part of the classes of its
// namespace) changed or one went away.
func selectorRuleChanged(snap *index.Snapshot, cs *index.ChangeSet) bool {
	for _, k := range cs.Configs[index.ConfigDestinationRule] {
		if snap == nil {
			return true
		}
		if c, ok := snap.Config(index.ConfigDestinationRule, k); !ok || c.HasSelector {
			return true
		}
	}
	return false
}
