package ingest

import (
	"fmt"
	"regexp"
	"strings"

	bootstrap "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"
)

// EnvoyFilter validation follows istiod's (pkg/config/validation/envoyfilter):
// each config patch needs applyTo, a patch with an operation, and a value
// unless it removes; a proxyVersion match must compile as a regular
// expression; applyTo and the match's object type must agree; filter and
// sub-filter matches need names; and the value must convert to the Envoy
// message applyTo names (PatchValue), resolving the types of its Anys.
// istiod's warnings (deprecated filter names and types, fields unknown to
// its Envoy API) are not reported, as for the other kinds.

// maxProxyVersionLen is istiod's bound on a proxyVersion expression: a
// longer one is not compiled, and its patch matches no proxy.
const maxProxyVersionLen = 1024

// hcmFilterNames are the names a sub-filter match's filter must have: the
// HTTP connection manager, by its current and its deprecated name.
var hcmFilterNames = []string{"envoy.filters.network.http_connection_manager", "envoy.http_connection_manager"}

func (v *validator) envoyFilter(p *fieldPath, ef *networking.EnvoyFilter) {
	if sel := ef.GetWorkloadSelector(); sel != nil {
		v.workloadSelector(p.f("workloadSelector").f("labels"), sel.GetLabels())
		if len(ef.GetTargetRefs()) > 0 {
			v.errorf(p, "set only one of workloadSelector and targetRefs")
		}
	}
	for i, r := range ef.GetTargetRefs() {
		v.targetRef(p.f("targetRefs").i(i), r)
	}
	for i, cp := range ef.GetConfigPatches() {
		v.envoyConfigPatch(p.f("configPatches").i(i), cp)
	}
}

func (v *validator) envoyConfigPatch(p *fieldPath, cp *networking.EnvoyFilter_EnvoyConfigObjectPatch) {
	if cp == nil {
		v.errorf(p, "null config patch")
		return
	}
	m := cp.GetMatch()
	if m.GetContext() == networking.EnvoyFilter_WAYPOINT {
		return // istiod does not validate waypoint patches (and pilotfish serves no waypoints)
	}
	switch {
	case cp.GetApplyTo() == networking.EnvoyFilter_INVALID:
		v.errorf(p.f("applyTo"), "required")
		return
	case cp.GetPatch() == nil:
		v.errorf(p.f("patch"), "required")
		return
	case cp.GetPatch().GetOperation() == networking.EnvoyFilter_Patch_INVALID:
		v.errorf(p.f("patch").f("operation"), "required")
		return
	case cp.GetPatch().GetOperation() != networking.EnvoyFilter_Patch_REMOVE && cp.GetPatch().GetValue() == nil:
		v.errorf(p.f("patch").f("value"), "required for operation %s (only REMOVE takes none)", cp.GetPatch().GetOperation())
		return
	}
	if ver := m.GetProxy().GetProxyVersion(); ver != "" && len(ver) <= maxProxyVersionLen {
		if _, err := regexp.Compile(ver); err != nil {
			v.errorf(p.f("match").f("proxy").f("proxyVersion"), "invalid regular expression: %v", err)
			return
		}
	}
	if !v.envoyPatchMatch(p.f("match"), cp.GetApplyTo(), m) {
		return
	}
	if _, err := PatchValue(cp.GetApplyTo(), cp.GetPatch().GetValue()); err != nil {
		v.errorf(p.f("patch").f("value"), "%v", err)
	}
}

// envoyPatchMatch checks that the match's object type fits applyTo; false
// stops the patch's checks, as istiod's validation does.
func (v *validator) envoyPatchMatch(p *fieldPath, applyTo networking.EnvoyFilter_ApplyTo, m *networking.EnvoyFilter_EnvoyConfigObjectMatch) bool {
	if m.GetObjectTypes() == nil {
		return true
	}
	switch applyTo {
	case networking.EnvoyFilter_LISTENER, networking.EnvoyFilter_FILTER_CHAIN,
		networking.EnvoyFilter_NETWORK_FILTER, networking.EnvoyFilter_HTTP_FILTER:
		l := m.GetListener()
		if l == nil {
			v.errorf(p, "applyTo %s needs a listener match", applyTo)
			return false
		}
		f := l.GetFilterChain().GetFilter()
		if f == nil {
			return true
		}
		fp := p.f("listener").f("filterChain").f("filter")
		if f.GetName() == "" {
			v.errorf(fp.f("name"), "required in a filter match")
			return false
		}
		if sub := f.GetSubFilter(); sub != nil {
			switch {
			case applyTo != networking.EnvoyFilter_HTTP_FILTER:
				v.errorf(fp.f("subFilter"), "only applyTo HTTP_FILTER may match a sub-filter, not %s", applyTo)
				return false
			case f.GetName() != hcmFilterNames[0] && f.GetName() != hcmFilterNames[1]:
				v.errorf(fp.f("name"), "a sub-filter match needs the filter %s, not %q", hcmFilterNames[0], f.GetName())
				return false
			case sub.GetName() == "":
				v.errorf(fp.f("subFilter").f("name"), "required in a sub-filter match")
				return false
			}
		}
	case networking.EnvoyFilter_ROUTE_CONFIGURATION, networking.EnvoyFilter_VIRTUAL_HOST, networking.EnvoyFilter_HTTP_ROUTE:
		if m.GetRouteConfiguration() == nil {
			v.errorf(p, "applyTo %s needs a routeConfiguration match", applyTo)
		}
	case networking.EnvoyFilter_CLUSTER:
		if m.GetCluster() == nil {
			v.errorf(p, "applyTo CLUSTER needs a cluster match")
		}
	}
	return true
}

// PatchValue converts an EnvoyFilter patch value to the Envoy message its
// applyTo names (a Cluster for CLUSTER, an HttpFilter for HTTP_FILTER, ...),
// nil for none (REMOVE). Fields unknown to pilotfish's Envoy API are
// dropped, as istiod does, so that a value written for a newer Envoy still
// applies; an Any whose type is not linked (envoyfilter_types.go) is an
// error, as in istiod.
func PatchValue(applyTo networking.EnvoyFilter_ApplyTo, value *structpb.Struct) (proto.Message, error) {
	if value == nil {
		return nil, nil
	}
	msg := patchMessage(applyTo)
	if msg == nil {
		return nil, fmt.Errorf("applyTo %s takes no value", applyTo)
	}
	js, err := protojson.Marshal(value)
	if err != nil {
		return nil, err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, msg); err != nil {
		s := strings.ReplaceAll(err.Error(), "\u00a0", " ") // protojson's errors use a non-breaking space
		if strings.Contains(s, "unable to resolve") {
			return nil, fmt.Errorf("not a %T: referenced type unknown: %s", msg, s)
		}
		return nil, fmt.Errorf("not a %T: %s", msg, s)
	}
	return msg, nil
}

// patchMessage is an empty message of the type applyTo patches.
func patchMessage(applyTo networking.EnvoyFilter_ApplyTo) proto.Message {
	switch applyTo {
	case networking.EnvoyFilter_LISTENER:
		return &listener.Listener{}
	case networking.EnvoyFilter_FILTER_CHAIN:
		return &listener.FilterChain{}
	case networking.EnvoyFilter_NETWORK_FILTER:
		return &listener.Filter{}
	case networking.EnvoyFilter_HTTP_FILTER:
		return &hcm.HttpFilter{}
	case networking.EnvoyFilter_LISTENER_FILTER:
		return &listener.ListenerFilter{}
	case networking.EnvoyFilter_ROUTE_CONFIGURATION:
		return &route.RouteConfiguration{}
	case networking.EnvoyFilter_VIRTUAL_HOST:
		return &route.VirtualHost{}
	case networking.EnvoyFilter_HTTP_ROUTE:
		return &route.Route{}
	case networking.EnvoyFilter_CLUSTER:
		return &cluster.Cluster{}
	case networking.EnvoyFilter_EXTENSION_CONFIG:
		return &core.TypedExtensionConfig{}
	case networking.EnvoyFilter_BOOTSTRAP:
		return &bootstrap.Bootstrap{}
	}
	return nil
}
