package engine

import (
	"errors"
	"fmt"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// What cmd's wiring needs of the engine besides New, in engine's terms, so
// that cmd names no index or encode type (it imports neither).

// CacheCounters is what metrics read of a bytes cache: its per-kind
// counters, and the EnvoyFilter patches that failed to apply at its
// generations. The engine's cache (Engine.Cache) is one.
type CacheCounters interface {
	Stats() []encode.Stats
	PatchFailures() (uint64, []encode.PatchFailure)
}

// IndexCounts are the sizes and versions of the current snapshot, for
// metrics gauges.
type IndexCounts struct {
	Services, EndpointShards int
	Version, ConfigVersion   uint64
}

// CountIndex reads idx's current snapshot's sizes and versions.
func CountIndex(idx Index) IndexCounts {
	s := idx.Snapshot()
	return IndexCounts{Services: s.NumServices(), EndpointShards: s.NumEndpointShards(), Version: s.Version, ConfigVersion: s.ConfigVersion}
}

// MeshSettings are the mesh-wide settings a deployment chooses; the rest
// of encode.Mesh keeps istiod's defaults. Empty fields keep the default.
type MeshSettings struct {
	// DomainSuffix is the cluster DNS domain (cluster.local).
	DomainSuffix string
	// ClusterID is stamped on endpoints of every source (Kubernetes).
	ClusterID string
	// TrustDomain is the SPIFFE trust domain of identities and SAN checks
	// (cluster.local).
	TrustDomain string
	// OutboundTrafficPolicy is MeshConfig outboundTrafficPolicy.mode,
	// ALLOW_ANY (the default) or REGISTRY_ONLY: where a sidecar sends
	// traffic to a destination no service defines. A Sidecar's own
	// outboundTrafficPolicy overrides it for the proxies it selects, as in
	// istiod. (The mesh ConfigMap, once read, sets it here too.)
	OutboundTrafficPolicy string
	// TrustDomainAliases are trust domains whose identities count as the
	// mesh's own (meshConfig trustDomainAliases).
	TrustDomainAliases []string
	// JWKSFetchMode is PILOT_JWT_ENABLE_REMOTE_JWKS: istiod (or false,
	// empty), hybrid (or true), envoy; CheckJWKSFetchMode tells a bad one.
	JWKSFetchMode string
	// RootNamespace is meshConfig rootNamespace (istio-system).
	RootNamespace string
	// ConnectTimeout is meshConfig connectTimeout (0: 10s).
	ConnectTimeout time.Duration
	// ProtocolDetectionTimeout is meshConfig protocolDetectionTimeout
	// (0: disabled, istiod's default).
	ProtocolDetectionTimeout time.Duration
	// DisableAutoMTLS is meshConfig enableAutoMtls: false.
	DisableAutoMTLS bool
	// TraceSampling is PILOT_TRACE_SAMPLING: the tracing sampling
	// percentage where defaultConfig.tracing (or a proxy's PROXY_CONFIG)
	// sets none (0: istiod's default, 1); outside [0, 100] is refused.
	TraceSampling float64
	// Config is the whole mesh config (istiod's defaults applied), for the
	// fields read by applyListenerMesh and applyClusterMesh; nil: istiod's
	// defaults. The fields above, which flags may override, win over it.
	Config *meshv1alpha1.MeshConfig
}

// CheckJWKSFetchMode reports whether s is one of istiod's
// PILOT_JWT_ENABLE_REMOTE_JWKS values (istiod takes any other as its
// default; pilotfish refuses it).
func CheckJWKSFetchMode(s string) bool {
	_, ok := encode.ParseJWKSFetchMode(s)
	return ok
}

// ErrBadMeshSetting: a mesh setting has a value pilotfish does not know.
var ErrBadMeshSetting = errors.New("invalid mesh setting")

// Mesh builds the mesh for Options.Mesh from s. An unknown value fails,
// naming the setting.
func (s MeshSettings) Mesh() (*encode.Mesh, error) {
	m := encode.DefaultMesh()
	if s.Config != nil {
		if err := applyListenerMesh(m, s.Config); err != nil {
			return nil, err
		}
		if err := applyClusterMesh(m, s.Config); err != nil {
			return nil, err
		}
		if err := applyTelemetryMesh(m, s.Config); err != nil {
			return nil, err
		}
		applyExtAuthzMesh(m, s.Config)                                         // mesh_extauthz.go
		if err := applyTracingMesh(m, s.Config, s.TraceSampling); err != nil { // mesh_tracing.go
			return nil, err
		}
	}
	switch s.OutboundTrafficPolicy {
	case "", "ALLOW_ANY":
	case "REGISTRY_ONLY":
		m.OutboundAllowAny = false
	case "ALLOW_ANY_DYNAMIC_DNS":
		return nil, fmt.Errorf("%w: outboundTrafficPolicy.mode %q is not supported (ALLOW_ANY or REGISTRY_ONLY)", ErrBadMeshSetting, s.OutboundTrafficPolicy)
	default:
		return nil, fmt.Errorf("%w: outboundTrafficPolicy.mode %q: want ALLOW_ANY or REGISTRY_ONLY", ErrBadMeshSetting, s.OutboundTrafficPolicy)
	}
	if s.DomainSuffix != "" {
		m.DomainSuffix = s.DomainSuffix
	}
	if s.ClusterID != "" {
		m.ClusterID = s.ClusterID
	}
	if s.TrustDomain != "" {
		m.TrustDomain = s.TrustDomain
	}
	m.TrustDomainAliases = append([]string(nil), s.TrustDomainAliases...)
	if s.RootNamespace != "" {
		m.RootNamespace = s.RootNamespace
	}
	if s.ConnectTimeout > 0 {
		m.ConnectTimeout = s.ConnectTimeout
	}
	m.ProtocolDetectionTimeout = s.ProtocolDetectionTimeout
	m.EnableAutoMTLS = !s.DisableAutoMTLS
	m.JWKSFetchMode, _ = encode.ParseJWKSFetchMode(s.JWKSFetchMode)
	return m, nil
}
