package meshconfig

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	meshv1 "istio.io/api/mesh/v1alpha1"
)

// Selector converts a discoverySelectors entry as istiod does
// (pkg/config/mesh/labelselector): nil matches nothing, an empty one
// everything; a bad key, value or operator is an error.
func Selector(s *meshv1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	if len(s.MatchLabels)+len(s.MatchExpressions) == 0 {
		return labels.Everything(), nil
	}
	reqs := make([]labels.Requirement, 0, len(s.MatchLabels)+len(s.MatchExpressions))
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.MatchLabels {
			if !yield(k) {
				return
			}
		}
	}) {
		r, err := labels.NewRequirement(k, selection.Equals, []string{s.MatchLabels[k]})
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, *r)
	}
	for _, e := range s.MatchExpressions {
		var op selection.Operator
		switch metav1.LabelSelectorOperator(e.Operator) {
		case metav1.LabelSelectorOpIn:
			op = selection.In
		case metav1.LabelSelectorOpNotIn:
			op = selection.NotIn
		case metav1.LabelSelectorOpExists:
			op = selection.Exists
		case metav1.LabelSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		default:
			return nil, fmt.Errorf("%q is not a valid label selector operator", e.Operator)
		}
		r, err := labels.NewRequirement(e.Key, op, slices.Clone(e.Values))
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, *r)
	}
	return labels.NewSelector().Add(reqs...), nil
}

// DiscoverySelectors returns the mesh's discoverySelectors as Kubernetes
// label selectors (what a namespace filter takes); nil when there are
// none (every namespace is read).
func DiscoverySelectors(mc *meshv1.MeshConfig) []*metav1.LabelSelector {
	if len(mc.GetDiscoverySelectors()) == 0 {
		return nil
	}
	out := make([]*metav1.LabelSelector, 0, len(mc.DiscoverySelectors))
	for _, s := range mc.DiscoverySelectors {
		if s == nil {
			continue
		}
		ls := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
		for _, e := range s.MatchExpressions {
			ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: slices.Clone(e.Values)})
		}
		out = append(out, ls)
	}
	return out
}
