package ingest

import (
	"errors"
	"regexp"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	networking "istio.io/api/networking/v1alpha3"
)

// EnvoyFilter validation follows istiod's (pkg/config/validation/envoyfilter):
// each config patch needs applyTo, a patch with an operation, and a value
// unless it removes; a proxyVersion match must compile as a regular
// expression; applyTo and the match's object type must agree; filter and
// sub-filter matches need names; and the value must convert to the Envoy
// message applyTo names (envoypatch.CompilePatch), resolving the types of its Anys.
// istiod's warnings (deprecated filter names and types, fields unknown to
// its Envoy API) are not reported, as for the other kinds.

// maxProxyVersionLen is istiod's bound on a proxyVersion expression: a
// longer one is not compiled, and its patch matches no proxy (envoypatch).
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
	// The compilation conversion uses (envoypatch), so that what validates
	// is what applies.
	if _, err := envoypatch.CompilePatch("", 0, cp); err != nil {
		var pe *envoypatch.PatchError
		if errors.As(err, &pe) {
			err = pe.Err
		}
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
