package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
)

// podNode is the xDS node istio-agent sends for an injected pod: its ID
// (sidecar~IP~pod.ns~ns.svc.cluster.local) and metadata from the pod and
// the injected istio-proxy container (every literal ISTIO_META_* variable,
// PROXY_CONFIG, and what the agent reads through the downward API).
func podNode(p *corev1.Pod, proxy *corev1.Container) (*corev3.Node, error) {
	labels := map[string]any{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	md := map[string]any{"NAMESPACE": p.Namespace, "SERVICE_ACCOUNT": p.Spec.ServiceAccountName, "LABELS": labels,
		"INSTANCE_IPS": p.Status.PodIP, "ISTIO_VERSION": "1.31.0", "NAME": p.Name}
	for _, e := range proxy.Env {
		switch {
		case strings.HasPrefix(e.Name, "ISTIO_META_") && e.Value != "":
			md[strings.TrimPrefix(e.Name, "ISTIO_META_")] = e.Value
		case e.Name == "PROXY_CONFIG":
			var pc map[string]any
			if err := json.Unmarshal([]byte(e.Value), &pc); err != nil {
				return nil, fmt.Errorf("PROXY_CONFIG: %w", err)
			}
			md["PROXY_CONFIG"] = pc
		}
	}
	s, err := structpb.NewStruct(md)
	if err != nil {
		return nil, err
	}
	return &corev3.Node{Id: fmt.Sprintf("sidecar~%s~%s.%s~%s.svc.cluster.local", p.Status.PodIP, p.Name, p.Namespace, p.Namespace), Metadata: s}, nil
}

// proxyXDS is one snapshot of what a control plane serves a proxy.
type proxyXDS struct {
	clusters  map[string]*clusterv3.Cluster
	listeners map[string]*listenerv3.Listener
	routes    map[string]*routev3.RouteConfiguration
}

// fetchXDS opens an ADS stream to dial over mTLS with the workload's
// certificate (the server checked against the mesh root under the name
// discoveryAddress gives), as node, and returns the first CDS and LDS
// responses and the RDS response for routeNames.
func fetchXDS(ctx context.Context, pki *meshPKI, discoveryAddress, dial string, cert *workloadCert, node *corev3.Node, routeNames ...string) (*proxyXDS, error) {
	cc, err := grpc.NewClient(dial, grpc.WithTransportCredentials(credentials.NewTLS(pki.clientTLS(discoveryAddress, &cert.tls))))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	out := &proxyXDS{clusters: map[string]*clusterv3.Cluster{}, listeners: map[string]*listenerv3.Listener{},
		routes: map[string]*routev3.RouteConfiguration{}}
	for _, req := range []struct {
		typ   string
		names []string
	}{{resourcev3.ClusterType, nil}, {resourcev3.ListenerType, nil}, {resourcev3.RouteType, routeNames}} {
		if req.names == nil && req.typ == resourcev3.RouteType {
			break
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: req.typ, ResourceNames: req.names}); err != nil {
			return nil, err
		}
		for {
			resp, err := st.Recv()
			if err != nil {
				return nil, fmt.Errorf("ADS at %s (%s): %w", discoveryAddress, dial, err)
			}
			if resp.TypeUrl != req.typ {
				continue // a push of a type asked before
			}
			for _, r := range resp.Resources {
				if err := out.add(req.typ, r.Value); err != nil {
					return nil, err
				}
			}
			if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: req.typ, ResourceNames: req.names,
				VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
				return nil, err
			}
			break
		}
	}
	return out, nil
}

func (x *proxyXDS) add(typ string, b []byte) error {
	var err error
	switch typ {
	case resourcev3.ClusterType:
		c := &clusterv3.Cluster{}
		err = proto.Unmarshal(b, c)
		x.clusters[c.Name] = c
	case resourcev3.ListenerType:
		l := &listenerv3.Listener{}
		err = proto.Unmarshal(b, l)
		x.listeners[l.Name] = l
	default:
		rc := &routev3.RouteConfiguration{}
		err = proto.Unmarshal(b, rc)
		x.routes[rc.Name] = rc
	}
	if err != nil {
		return fmt.Errorf("%s: %w", typ, err)
	}
	return nil
}

// upstreamMTLS returns, for each ISTIO_MUTUAL TLS context of cluster (its
// transport socket and auto-mTLS's socket matches), the SANs it accepts
// and the SDS secret its validation context takes the roots from.
func upstreamMTLS(c *clusterv3.Cluster) (sans, rootSecrets []string) {
	sockets := []*corev3.TransportSocket{c.GetTransportSocket()}
	for _, m := range c.GetTransportSocketMatches() {
		sockets = append(sockets, m.GetTransportSocket())
	}
	for _, s := range sockets {
		if s.GetTypedConfig() == nil {
			continue
		}
		var up tlsv3.UpstreamTlsContext
		if err := s.GetTypedConfig().UnmarshalTo(&up); err != nil {
			continue // raw buffer
		}
		cvc := up.GetCommonTlsContext().GetCombinedValidationContext()
		for _, m := range cvc.GetDefaultValidationContext().GetMatchSubjectAltNames() {
			sans = append(sans, m.GetExact())
		}
		for _, m := range cvc.GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
			sans = append(sans, m.GetMatcher().GetExact())
		}
		rootSecrets = append(rootSecrets, cvc.GetValidationContextSdsSecretConfig().GetName())
	}
	return sans, rootSecrets
}

// inboundPort reports how the inbound listener (virtualInbound) serves
// port: how many filter chains match it, whether every one requires a
// client certificate validated against the SDS secret ROOTCA, and the RBAC
// filters of their HTTP connection managers.
func inboundPort(l *listenerv3.Listener, port uint32) (chains int, allMTLS bool, rbacs []*rbachttp.RBAC) {
	allMTLS = true
	for _, fc := range l.GetFilterChains() {
		if fc.GetFilterChainMatch().GetDestinationPort().GetValue() != port {
			continue
		}
		chains++
		var down tlsv3.DownstreamTlsContext
		if fc.GetTransportSocket().GetTypedConfig() == nil || fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&down) != nil ||
			!down.GetRequireClientCertificate().GetValue() ||
			down.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() != "ROOTCA" {
			allMTLS = false
		}
		for _, f := range fc.GetFilters() {
			var hcm hcmv3.HttpConnectionManager
			if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&hcm) != nil {
				continue
			}
			for _, hf := range hcm.GetHttpFilters() {
				var r rbachttp.RBAC
				if hf.GetName() == "envoy.filters.http.rbac" && hf.GetTypedConfig().UnmarshalTo(&r) == nil {
					rbacs = append(rbacs, &r)
				}
			}
		}
	}
	return chains, allMTLS, rbacs
}

// rbacAllows: an ALLOW policy of one of the filters names principal (a
// SPIFFE ID) exactly.
func rbacAllows(rbacs []*rbachttp.RBAC, principal string) bool {
	for _, r := range rbacs {
		if r.GetRules() == nil || r.GetRules().GetAction() != 0 { // ALLOW
			continue
		}
		for _, p := range r.GetRules().GetPolicies() {
			b, _ := proto.Marshal(p)
			if strings.Contains(string(b), principal) {
				return true
			}
		}
	}
	return false
}

// routeTimeout is the timeout of the first route of the virtual host
// named host in the route configuration, or "" without one.
func routeTimeout(x *proxyXDS, routeName, host string) (string, bool) {
	rc := x.routes[routeName]
	for _, vh := range rc.GetVirtualHosts() {
		if vh.GetName() != host && !slices.Contains(vh.GetDomains(), host) {
			continue
		}
		for _, r := range vh.GetRoutes() {
			if t := r.GetRoute().GetTimeout(); t != nil {
				return t.AsDuration().String(), true
			}
			return "", true
		}
	}
	return "", false
}
