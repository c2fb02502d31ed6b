package index

// ConfigKind enumerates the Istio config kinds the index holds.
type ConfigKind uint8

const (
	ConfigVirtualService ConfigKind = iota
	ConfigDestinationRule
	ConfigGateway
	ConfigSidecar
	ConfigServiceEntry
	ConfigWorkloadEntry
	ConfigAuthorizationPolicy
	ConfigPeerAuthentication
	ConfigRequestAuthentication
	// ConfigSecret is a Kubernetes Secret holding gateway credentials
	// (credentialName): its Spec is a map[string][]byte of the credential
	// keys only (ingest drops every other key before the index sees it).
	ConfigSecret
	// ConfigJWKS is a JSON Web Key Set the control plane fetched for
	// RequestAuthentication rules (package jwks; ingest writes it). Its Key
	// is the source, not a namespaced name: Namespace is the issuer's
	// symbol, Name the jwksUri's (0 for a key set found through the
	// issuer's OpenID discovery); its Spec is a JWKS.
	ConfigJWKS
	// ConfigEnvoyFilter is an EnvoyFilter (networking.istio.io/v1alpha3):
	// Spec the istio.io/api message, Selector its workloadSelector labels,
	// Priority its priority, CreationTime istiod's tie-break. Rules decide
	// which apply to a proxy class (docs/envoyfilter-design.md).
	ConfigEnvoyFilter
	// ConfigWasmPlugin is a WasmPlugin (extensions.istio.io/v1alpha1):
	// Spec the istio.io/api message, Selector its selector's matchLabels,
	// Priority its priority (math.MinInt32 when unset, istiod's order),
	// CreationTime istiod's tie-break. Rules decide which apply to a proxy
	// class (rules/wasm.go).
	ConfigWasmPlugin
	// ConfigTelemetry is a Telemetry (telemetry.istio.io): Spec the
	// istio.io/api message, Selector its selector's matchLabels (none: the
	// namespace's, or with targetRefs a gateway's), CreationTime istiod's
	// order. Rules merge those of a proxy (rules/telemetry.go).
	ConfigTelemetry
	numConfigKinds
)

// JWKS is the Spec of a ConfigJWKS row: a key set as its server sent it.
type JWKS struct {
	Issuer, URI string
	Keys        string
}

// NumConfigKinds is the number of config kinds.
const NumConfigKinds = int(numConfigKinds)

var configKindNames = [...]string{
	"VirtualService", "DestinationRule", "Gateway", "Sidecar", "ServiceEntry",
	"WorkloadEntry", "AuthorizationPolicy", "PeerAuthentication", "RequestAuthentication", "Secret", "JWKS",
	"EnvoyFilter", "WasmPlugin", "Telemetry",
}

func (k ConfigKind) String() string {
	if int(k) < len(configKindNames) {
		return configKindNames[k]
	}
	return "Unknown"
}

// ConfigKey is the primary key of a config object within its kind's table.
type ConfigKey struct {
	Namespace Sym
	Name      Sym
}

func (k ConfigKey) shard() uint64 { return mix64(uint64(k.Namespace)<<32 | uint64(k.Name)) }

// Config is one Istio config object. The index does not interpret the spec
// (it imports no Istio types); ingest extracts the fields the secondary
// indexes need (Hosts, Selector) when it builds the row.
type Config struct {
	Kind ConfigKind
	Key  ConfigKey
	// Spec is the istio.io/api spec message. It is shared and immutable.
	Spec any
	// Derived is a value ingest derives from Spec once per object version
	// (an EnvoyFilter's compiled patches); index never reads it. It is
	// shared and immutable, and moves with Hash as Spec does.
	Derived any
	// Hosts are the hosts the object applies to (VirtualService and
	// DestinationRule hosts, Gateway server hosts, ServiceEntry hosts), as
	// written, for the by-host index.
	Hosts []Sym
	// Selector is the workload selector (0 with HasSelector false: none).
	Selector    LabelSetID
	HasSelector bool
	Labels      LabelSetID
	// SubsetLabels are a DestinationRule's subsets' labels, interned by
	// ingest, in the order of its spec's subsets (0: a subset without
	// labels), so that readers never intern.
	SubsetLabels []LabelSetID
	// SourceLabelKeys are the label keys a VirtualService's match
	// sourceLabels name (HTTP, TCP and TLS matches), interned by ingest,
	// sorted by Sym, without repeats: the labels of a proxy that decide
	// which of its routes apply to it (ConfigsWithSourceLabels finds them).
	SourceLabelKeys []Sym
	// Delegates are the VirtualServices a VirtualService's HTTP routes
	// delegate to (route.delegate, its namespace defaulted to the
	// VirtualService's), in route order.
	Delegates []ConfigKey
	// CreationTime is the object's metadata.creationTimestamp in Unix
	// nanoseconds (0: none, as for most objects of a config directory):
	// istiod orders VirtualServices by it, oldest first, then by name and
	// namespace, and merges several DestinationRules for one host oldest
	// first.
	CreationTime int64
	// DryRun is an AuthorizationPolicy's istio.io/dry-run annotation: its
	// rules are evaluated and logged, not enforced.
	DryRun bool
	// Priority is an EnvoyFilter's priority: istiod applies filters in
	// ascending priority, then root namespace first, then oldest first. A
	// WasmPlugin's orders its filters within a phase, highest first
	// (math.MinInt32 when unset).
	Priority   int32
	ExportTo   ExportTo
	Generation int64
	// SourceFile and SourceLine say where the object came from (a file of
	// the file source; 0 for objects from an API server).
	SourceFile Sym
	SourceLine int32
	// Hash is supplied by the caller: the content hash of the whole object
	// (the index cannot hash a spec it does not interpret).
	Hash uint64
}
