package rules

import (
	"github.com/pilotfish-mesh/pilotfish/index"
)

// tlsModeLabel makes a PERMISSIVE proxyless gRPC server STRICT (its
// clients use mTLS), so it is always part of a class's labels.
const tlsModeLabel = "security.istio.io/tlsMode"

// gatewayNameLabel names the Gateway API Gateway a proxy is deployed for
// (istiod's workloadGatewayName): policies attach to it by targetRef
// (authn_target.go), so it is always part of a class's labels.
const gatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// securityLabels is the part of a proxy's labels its class keeps (the
// ProxyClass.Labels field): the labels whose keys a workload selector of a
// PeerAuthentication, AuthorizationPolicy, RequestAuthentication or
// WasmPlugin in the proxy's or the root namespace names, or of a DestinationRule in the
// proxy's namespace (only there do they apply, destrule.go), those
// VirtualService match sourceLabels name (virtualservice_source.go), the
// keys a DestinationRule's failoverPriority lists (failoverKeys,
// FailoverLabelKeys: EDS orders endpoints by them), those EnvoyFilter
// workloadSelectors of the proxy's or the root namespace name
// (envoyfilter.go), and tlsMode. Proxies that differ
// only in labels no security policy looks at (pod-template-hash,
// statefulset pod names) still share a class. A proxy with labels of which
// none matter gets "-" (labels known, none relevant), so that the scope
// does not fall back to its workload's labels in the index.
func securityLabels(snap *index.Snapshot, rootNS string, node *Node) string {
	return securityLabelsWith(snap, rootNS, node, FailoverLabelKeys(snap))
}

// securityLabelsWith is securityLabels given the snapshot's
// FailoverLabelKeys (memoized by ClassOfIn's views).
func securityLabelsWith(snap *index.Snapshot, rootNS string, node *Node, failoverKeys []string) string {
	ns, labels := node.Namespace, node.Labels
	if len(labels) == 0 {
		labels = nodeWorkloadLabels(snap, node)
	}
	if len(labels) == 0 {
		return ""
	}
	var keys map[string]bool
	root, _ := snap.Symbols.Lookup(rootNS)
	space, _ := snap.Symbols.Lookup(ns)
	addKeys := func(c *index.Config) bool {
		if !c.HasSelector {
			return true
		}
		for _, l := range snap.Labels.Get(c.Selector) {
			if keys == nil {
				keys = map[string]bool{}
			}
			keys[snap.String(l.Key)] = true
		}
		return true
	}
	if space != 0 && snap.NumConfigs(index.ConfigDestinationRule) > 0 {
		snap.ConfigsInNamespace(index.ConfigDestinationRule, space, addKeys)
	}
	if space != 0 && snap.NumConfigs(index.ConfigTelemetry) > 0 {
		snap.ConfigsInNamespace(index.ConfigTelemetry, space, addKeys) // rules/telemetry.go
	}
	for _, kind := range []index.ConfigKind{index.ConfigPeerAuthentication, index.ConfigAuthorizationPolicy, index.ConfigRequestAuthentication, index.ConfigWasmPlugin} {
		if snap.NumConfigs(kind) == 0 {
			continue
		}
		for _, s := range []index.Sym{root, space} {
			if s == 0 {
				continue
			}
			snap.ConfigsInNamespace(kind, s, addKeys)
		}
	}
	keys = addSourceLabelKeys(snap, space, keys)    // virtualservice_source.go
	keys = envoyFilterKeys(snap, root, space, keys) // envoyfilter.go
	for _, k := range failoverKeys {
		if keys == nil {
			keys = map[string]bool{}
		}
		keys[k] = true
	}
	kept := map[string]string{}
	for k, v := range labels {
		if keys[k] || k == tlsModeLabel || k == gatewayNameLabel {
			kept[k] = v
		}
	}
	if len(kept) == 0 {
		return "-"
	}
	return encodeLabels(kept)
}

// nodeWorkloadLabels are the labels of the Pod or WorkloadEntry at one of
// the node's IPs in its namespace: a proxy without LABELS metadata is
// selected by its workload's labels, as istiod does through the Pod.
func nodeWorkloadLabels(snap *index.Snapshot, node *Node) map[string]string {
	ns, ok := snap.Symbols.Lookup(node.Namespace)
	if !ok {
		return nil
	}
	var out map[string]string
	for _, ip := range node.IPs {
		snap.WorkloadsByAddr(ip, func(w *index.Workload) bool {
			if w.Key.Namespace != ns {
				return true
			}
			out = workloadLabels(snap, w.Labels)
			return false
		})
		if out != nil {
			break
		}
	}
	return out
}
