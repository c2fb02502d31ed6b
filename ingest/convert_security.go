package ingest

import (
	"strconv"

	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// securityRow fills the fields of a security policy's config row
// (PeerAuthentication, AuthorizationPolicy, RequestAuthentication) that
// the generic config row does not, and returns its workload selector.
func securityRow(row *index.Config, o *Object) (map[string]string, bool) {
	switch s := o.Spec.(type) {
	case *security.AuthorizationPolicy:
		row.DryRun, _ = strconv.ParseBool(o.Meta.Annotations[annotationDryRun]) // validation reports a bad value
		return workloadSelector(s.Selector)
	case *security.PeerAuthentication:
		return workloadSelector(s.Selector)
	case *security.RequestAuthentication:
		return workloadSelector(s.Selector)
	}
	return nil, false
}

func workloadSelector(s *typev1beta1.WorkloadSelector) (map[string]string, bool) {
	if s == nil {
		return nil, false
	}
	return s.MatchLabels, true
}
