package ingest

import (
	"strings"

	"google.golang.org/protobuf/proto"
	extensions "istio.io/api/extensions/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Kind is a kind of object pilotfish reads.
type Kind uint8

// The kinds, in a fixed order (the order is not significant but is stable).
const (
	KindUnknown Kind = iota
	KindService
	KindEndpointSlice
	KindPod
	KindNamespace
	KindServiceEntry
	KindWorkloadEntry
	KindVirtualService
	KindDestinationRule
	KindGateway
	KindSidecar
	KindAuthorizationPolicy
	KindPeerAuthentication
	KindRequestAuthentication
	KindSecret
	KindEnvoyFilter
	KindWasmPlugin
	KindTelemetry
	numKinds
)

// String returns the kind's name as written in manifests, e.g. "VirtualService".
func (k Kind) String() string {
	if k == KindUnknown || k >= numKinds {
		return "Unknown"
	}
	return kinds[k].name
}

// kindInfo is what decoding needs to know about a kind.
type kindInfo struct {
	name       string
	group      string   // "" for the core group
	versions   []string // accepted versions, newest first
	namespaced bool
	// newObject returns a pointer to an empty value of the decoded type: the
	// whole object for Kubernetes kinds, the spec message for Istio kinds.
	newObject func() any
}

func (i *kindInfo) istio() bool { return strings.HasSuffix(i.group, ".istio.io") }

// apiVersions lists the accepted group/version strings, for messages.
func (i *kindInfo) apiVersions() string {
	var b strings.Builder
	for n, v := range i.versions {
		if n > 0 {
			b.WriteString(", ")
		}
		if i.group != "" {
			b.WriteString(i.group)
			b.WriteByte('/')
		}
		b.WriteString(v)
	}
	return b.String()
}

var (
	networkingVersions = []string{"v1", "v1beta1", "v1alpha3"}
	securityVersions   = []string{"v1", "v1beta1"}
)

func protoNew[T any, P interface {
	*T
	proto.Message
}]() func() any {
	return func() any { return P(new(T)) }
}

func kubeNew[T any]() func() any { return func() any { return new(T) } }

// kinds is indexed by Kind. networking v1 and v1beta1 are aliases of
// v1alpha3 in istio.io/api and security v1 of v1beta1, so one Go type
// serves every version of a kind.
var kinds = [numKinds]kindInfo{
	KindService:               {"Service", "", []string{"v1"}, true, kubeNew[corev1.Service]()},
	KindEndpointSlice:         {"EndpointSlice", "discovery.k8s.io", []string{"v1"}, true, kubeNew[discoveryv1.EndpointSlice]()},
	KindPod:                   {"Pod", "", []string{"v1"}, true, kubeNew[corev1.Pod]()},
	KindNamespace:             {"Namespace", "", []string{"v1"}, false, kubeNew[corev1.Namespace]()},
	KindServiceEntry:          {"ServiceEntry", "networking.istio.io", networkingVersions, true, protoNew[networking.ServiceEntry]()},
	KindWorkloadEntry:         {"WorkloadEntry", "networking.istio.io", networkingVersions, true, protoNew[networking.WorkloadEntry]()},
	KindVirtualService:        {"VirtualService", "networking.istio.io", networkingVersions, true, protoNew[networking.VirtualService]()},
	KindDestinationRule:       {"DestinationRule", "networking.istio.io", networkingVersions, true, protoNew[networking.DestinationRule]()},
	KindGateway:               {"Gateway", "networking.istio.io", networkingVersions, true, protoNew[networking.Gateway]()},
	KindSidecar:               {"Sidecar", "networking.istio.io", networkingVersions, true, protoNew[networking.Sidecar]()},
	KindAuthorizationPolicy:   {"AuthorizationPolicy", "security.istio.io", securityVersions, true, protoNew[security.AuthorizationPolicy]()},
	KindPeerAuthentication:    {"PeerAuthentication", "security.istio.io", securityVersions, true, protoNew[security.PeerAuthentication]()},
	KindRequestAuthentication: {"RequestAuthentication", "security.istio.io", securityVersions, true, protoNew[security.RequestAuthentication]()},
	KindSecret:                {"Secret", "", []string{"v1"}, true, kubeNew[corev1.Secret]()},
	// EnvoyFilter exists only at v1alpha3 (Istio never promoted it).
	KindEnvoyFilter: {"EnvoyFilter", "networking.istio.io", []string{"v1alpha3"}, true, protoNew[networking.EnvoyFilter]()},
	// WasmPlugin exists only at v1alpha1.
	KindWasmPlugin: {"WasmPlugin", "extensions.istio.io", []string{"v1alpha1"}, true, protoNew[extensions.WasmPlugin]()},
	// Telemetry is served at v1 and v1alpha1, one message in istio.io/api.
	KindTelemetry: {"Telemetry", "telemetry.istio.io", []string{"v1", "v1alpha1"}, true, protoNew[telemetry.Telemetry]()},
}

type groupKind struct{ group, kind string }

// byGroupKind finds a kind by API group and kind name. The group matters:
// Knative's serving.knative.dev Service is not a Kubernetes Service.
var byGroupKind = func() map[groupKind]Kind {
	m := make(map[groupKind]Kind, numKinds)
	for k := KindUnknown + 1; k < numKinds; k++ {
		m[groupKind{kinds[k].group, kinds[k].name}] = k
	}
	return m
}()

// lookupKind resolves apiVersion and kind. known reports whether pilotfish
// reads this group and kind at all; versionOK whether it reads this version.
func lookupKind(apiVersion, kind string) (k Kind, known, versionOK bool) {
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	k, known = byGroupKind[groupKind{group, kind}]
	if !known {
		return KindUnknown, false, false
	}
	for _, v := range kinds[k].versions {
		if v == version {
			return k, true, true
		}
	}
	return k, true, false
}
