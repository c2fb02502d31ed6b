package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"istio.io/api/annotation"
	"istio.io/api/label"
)

// ignoredNamespaces are never injected (Kubernetes' own and kind's
// local-path-storage), whatever the pod or the config says.
var ignoredNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}

// required reports whether pod gets a sidecar, as istiod decides:
// never with host networking or in a system namespace; else an explicit
// sidecar.istio.io/inject (label over annotation) of "true" or "false";
// else the first never-selector that matches says no, then the first
// always-selector says yes; else the config's policy. A value other than
// "true" or "false" counts as unset.
func (s *Settings) required(pod *corev1.Pod) bool {
	if pod.Spec.HostNetwork || slices.Contains(ignoredNamespaces, pod.Namespace) {
		return false
	}
	choice := pod.Annotations[annotation.SidecarInject.Name]
	if v, ok := pod.Labels[label.SidecarInject.Name]; ok {
		choice = v
	}
	explicit, inject := true, false
	switch choice {
	case "true":
		inject = true
	case "false":
	default:
		explicit = false
	}
	if !explicit {
		set := labels.Set(pod.Labels)
		if matchesAny(s.Config.NeverInject, set) {
			explicit, inject = true, false
		} else if matchesAny(s.Config.AlwaysInject, set) {
			explicit, inject = true, true
		}
	}
	switch s.Config.Policy {
	case PolicyEnabled:
		return !explicit || inject
	case PolicyDisabled:
		return explicit && inject
	default: // istiod turns injection off on an unknown policy
		return false
	}
}

// matchesAny: an empty selector matches nothing here (istiod skips it).
func matchesAny(sels []labels.Selector, set labels.Set) bool {
	for _, s := range sels {
		if !s.Empty() && s.Matches(set) {
			return true
		}
	}
	return false
}
