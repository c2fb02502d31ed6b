package rules

import (
	securitytype "istio.io/api/type/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// gatewayAPIGroup is the API group of Gateway API Gateways.
const gatewayAPIGroup = "gateway.networking.k8s.io"

// attaches is istiod's ShouldAttachPolicy for an AuthorizationPolicy or
// RequestAuthentication c and a workload of namespace ns (not a waypoint:
// pilotfish serves none):
//   - a proxy that is not a Gateway API gateway (no
//     gateway.networking.k8s.io/gateway-name label: sidecars, Istio
//     Gateway deployments) ignores a policy with targetRef or targetRefs
//     altogether, and takes the others by selector (none: the namespace);
//   - a Gateway API gateway takes a policy without targets by selector
//     (istiod's ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY default), and a
//     policy of its own namespace whose targets name its Gateway
//     (group gateway.networking.k8s.io, kind Gateway). A target of kind
//     Service, ServiceEntry or GatewayClass attaches to waypoints only.
func attaches(snap *index.Snapshot, c *index.Config, ns index.Sym, labels map[string]string) bool {
	refs := policyTargets(c.Spec)
	gateway, isGatewayAPI := labels[gatewayNameLabel]
	if len(refs) == 0 {
		return !c.HasSelector || selects(snap, c, labels)
	}
	if !isGatewayAPI || c.Key.Namespace != ns {
		return false
	}
	for _, r := range refs {
		if r.GetNamespace() != "" && r.GetNamespace() != snap.String(ns) {
			continue // another namespace: never matches
		}
		if r.GetGroup() == gatewayAPIGroup && r.GetKind() == "Gateway" && r.GetName() == gateway {
			return true
		}
	}
	return false
}

// policyTargets are a policy's targetRefs, or its targetRef (istiod's
// GetTargetRefs).
func policyTargets(spec any) []*securitytype.PolicyTargetReference {
	t, ok := spec.(interface {
		GetTargetRef() *securitytype.PolicyTargetReference
		GetTargetRefs() []*securitytype.PolicyTargetReference
	})
	if !ok {
		return nil
	}
	if refs := t.GetTargetRefs(); len(refs) > 0 {
		return refs
	}
	if r := t.GetTargetRef(); r != nil {
		return []*securitytype.PolicyTargetReference{r}
	}
	return nil
}
