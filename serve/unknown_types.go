package serve

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// Type URLs the engine does not serve are answered as istiod answers them
// (pilot/pkg/xds/xdsgen.go findGenerator, and its generators), SotW and
// Delta alike:
//
//	ECDS (TypedExtensionConfig) from an engine that does not serve it
//	(pilotfish's engine serves WasmPlugins' configs, docs/wasm.md), istiod's
//	ambient types (istio.workload.Address, istio.workload.Workload,
//	istio.security.Authorization):
//	    istiod has generators; with no ambient index (pilotfish has none)
//	    they answer an empty set:
//	    SotW an empty response, Delta one that lists the subscribed names as
//	    removed. Kept on the stream as an answered type (bounded as any type
//	    is: 32 types, names per type), never pushed.
//	PCDS (istio.mesh.v1alpha1.ProxyConfig), HealthInformation:
//	    istiod answers nothing (PCDS only in multi-root meshes; health reports
//	    feed WorkloadEntry health) and keeps the stream: left unanswered,
//	    nothing kept. istio-agent sends both.
//	CDS, EDS, LDS, RDS, SDS, NDS the engine does not serve (test engines):
//	    left unanswered.
//	anything else (and istio.io/debug types on Delta):
//	    istiod's "api" generator (MCP over xDS), restricted by default
//	    (ENABLE_XDS_API_GENERATOR_AUTH) to callers authenticated in the root
//	    namespace: the stream ends with Unauthenticated (no verified identity:
//	    the plaintext port) or PermissionDenied (another namespace). A
//	    root-namespace caller gets an empty set (istiod would list that Istio
//	    kind's config; pilotfish serves none). A proxyless gRPC client
//	    (GENERATOR=grpc) is left unanswered instead: its generator answers
//	    only LDS, CDS, RDS and EDS.
//
// Every such request is counted (XDSMetrics.UnknownType) under a fixed kind,
// never the client's string; an empty-set type is counted once per stream,
// when first requested.

// answer is how a type is answered.
type answer uint8

const (
	answerServed answer = iota // the engine's resources
	answerEmpty                // an empty set: the engine does not serve the type, istiod answers it with nothing in it
	answerNone                 // no response (and the error that ends the stream, if any)
)

// Kinds of XDSMetrics.UnknownType: a fixed set.
const (
	UnknownECDS   = "ecds"
	UnknownWDS    = "wds"
	UnknownPCDS   = "pcds"
	UnknownHealth = "health"
	UnknownCore   = "xds"
	UnknownDebug  = "debug"
	UnknownOther  = "other"
)

// UnknownTypeKinds lists every kind XDSMetrics.UnknownType reports.
var UnknownTypeKinds = []string{UnknownECDS, UnknownWDS, UnknownPCDS, UnknownHealth, UnknownCore, UnknownDebug, UnknownOther}

// istiod's type URLs that pilotfish's engine does not serve.
const (
	TypeExtensionConfig       = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
	TypeProxyConfig           = "type.googleapis.com/istio.mesh.v1alpha1.ProxyConfig"
	TypeHealthInfo            = "type.googleapis.com/istio.v1.HealthInformation"
	TypeAddress               = "type.googleapis.com/istio.workload.Address"
	TypeWorkload              = "type.googleapis.com/istio.workload.Workload"
	TypeWorkloadAuthorization = "type.googleapis.com/istio.security.Authorization"
)

// defaultRootNamespace is istiod's root namespace when the mesh config
// names none.
const defaultRootNamespace = "istio-system"

// unknownKind classifies a type URL the engine does not serve.
func unknownKind(typeURL string) string {
	switch typeURL {
	case TypeExtensionConfig:
		return UnknownECDS
	case TypeAddress, TypeWorkload, TypeWorkloadAuthorization:
		return UnknownWDS
	case TypeProxyConfig:
		return UnknownPCDS
	case TypeHealthInfo:
		return UnknownHealth
	case engine.TypeCluster, engine.TypeEndpoint, engine.TypeListener, engine.TypeRoute, engine.TypeSecret, engine.TypeNameTable:
		return UnknownCore
	}
	if isDebugType(typeURL) {
		return UnknownDebug
	}
	return UnknownOther
}

// unknownType answers a request for typeURL, which the engine does not
// serve, as istiod would, and counts it.
func (c *conn) unknownType(typeURL string) (answer, error) {
	kind := unknownKind(typeURL)
	c.srv.metrics.UnknownType(kind)
	switch kind {
	case UnknownECDS, UnknownWDS:
		c.log.Debug("xds type not served: answered with an empty set", "type", typeURL)
		return answerEmpty, nil
	case UnknownPCDS, UnknownHealth, UnknownCore:
		c.log.Debug("xds type not served: left unanswered", "type", typeURL)
		return answerNone, nil
	}
	if c.grpcGen {
		c.log.Debug("xds type not served to a proxyless gRPC client: left unanswered", "type", clip(typeURL, clipShort))
		return answerNone, nil
	}
	root := *c.srv.rootNamespace.Load()
	switch {
	case c.who == nil || !c.who.check:
		c.log.Warn("xds stream refused: a type only the control plane may ask for, from an unauthenticated caller", "type", clip(typeURL, clipShort))
		return answerNone, status.Errorf(codes.Unauthenticated,
			"type %q is not served: other types are for callers authenticated in the root namespace %q (istiod's api generator)", clip(typeURL, clipShort), root)
	case c.who.id.Namespace != root:
		c.log.Warn("xds stream refused: a type only the control plane may ask for", "type", clip(typeURL, clipShort), "identity", c.who.id.String())
		return answerNone, status.Errorf(codes.PermissionDenied,
			"type %q is not served: other types are for the root namespace %q, the caller is %s (istiod's api generator)", clip(typeURL, clipShort), root, c.who.id)
	}
	c.log.Debug("xds type not served: answered with an empty set to the control plane", "type", clip(typeURL, clipShort))
	return answerEmpty, nil
}

// grpcGenerator reports whether a node asks for istiod's proxyless gRPC
// generator (metadata GENERATOR=grpc).
func grpcGenerator(node *corev3.Node) bool {
	return node.GetMetadata().GetFields()["GENERATOR"].GetStringValue() == "grpc"
}
