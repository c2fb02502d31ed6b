package engine

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// gatewayTopology reads gatewayTopology from the PROXY_CONFIG node metadata
// istio-agent sends (the mesh's defaultConfig merged with the pod's
// proxy.istio.io/config annotation and ProxyConfig resources), as istiod's
// ProxyConfigOrDefault does: protojson, enum values by name or number,
// unknown fields ignored. Without it, the zero value (istiod's default).
func gatewayTopology(md map[string]*structpb.Value) (encode.GatewayTopology, error) {
	pc := md["PROXY_CONFIG"].GetStructValue()
	if pc == nil {
		return encode.GatewayTopology{}, nil
	}
	gt := pc.GetFields()["gatewayTopology"]
	if gt == nil {
		return encode.GatewayTopology{}, nil
	}
	b, err := gt.MarshalJSON()
	if err != nil {
		return encode.GatewayTopology{}, fmt.Errorf("%w: PROXY_CONFIG.gatewayTopology: %v", ErrBadNode, err)
	}
	var t meshconfig.Topology
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &t); err != nil {
		return encode.GatewayTopology{}, fmt.Errorf("%w: PROXY_CONFIG.gatewayTopology: %v", ErrBadNode, err)
	}
	fcc := t.GetForwardClientCertDetails()
	if fcc < 0 || fcc > meshconfig.ForwardClientCertDetails_ALWAYS_FORWARD_ONLY {
		return encode.GatewayTopology{}, fmt.Errorf("%w: PROXY_CONFIG.gatewayTopology.forwardClientCertDetails: unknown value %d", ErrBadNode, fcc)
	}
	return encode.GatewayTopology{
		NumTrustedProxies: t.GetNumTrustedProxies(),
		ForwardClientCert: uint8(fcc),
		ProxyProtocol:     t.GetProxyProtocol() != nil,
	}, nil
}

// proxyConfigTracing reads PROXY_CONFIG's tracing: istiod takes a proxy's
// PROXY_CONFIG whole over the mesh's defaultConfig, so a PROXY_CONFIG
// without tracing means istiod's defaults (rules.TraceProxyConfig of an
// empty message). "" without PROXY_CONFIG. A negative sampling fails.
func proxyConfigTracing(md map[string]*structpb.Value) (string, error) {
	pc := md["PROXY_CONFIG"].GetStructValue()
	if pc == nil {
		return "", nil
	}
	var t meshconfig.Tracing
	if tv := pc.GetFields()["tracing"]; tv != nil {
		b, err := tv.MarshalJSON()
		if err != nil {
			return "", fmt.Errorf("%w: PROXY_CONFIG.tracing: %v", ErrBadNode, err)
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &t); err != nil {
			return "", fmt.Errorf("%w: PROXY_CONFIG.tracing: %v", ErrBadNode, err)
		}
	}
	if _, _, _, _, err := rules.TraceSettings(&t, 1); err != nil {
		return "", fmt.Errorf("%w: PROXY_CONFIG: %v", ErrBadNode, err)
	}
	return rules.TraceProxyConfig(&t), nil
}
