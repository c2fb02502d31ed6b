package encode

import (
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// epLabelValue returns the value of label key in set id, without allocating.
func epLabelValue(syms *index.Symbols, sets *index.LabelSets, id index.LabelSetID, key string) (string, bool) {
	if id == 0 {
		return "", false
	}
	k, ok := syms.Lookup(key)
	if !ok {
		return "", false
	}
	for _, l := range sets.Get(id) {
		if l.Key == k {
			return syms.String(l.Value), true
		}
	}
	return "", false
}

// epWorkloadName is the workload an endpoint belongs to, as istiod reports it:
// a Deployment's pods report the Deployment (the pod name up to its
// ReplicaSet's pod-template-hash); other workloads their own name.
func epWorkloadName(syms *index.Symbols, sets *index.LabelSets, labels index.LabelSetID, name string) string {
	if name == "" {
		return ""
	}
	if h, ok := epLabelValue(syms, sets, labels, "pod-template-hash"); ok && h != "" {
		if i := strings.LastIndex(name, "-"+h+"-"); i > 0 {
			return name[:i]
		}
	}
	return name
}

// epCanonicalService is istiod's labels.CanonicalService: the canonical name
// and revision from the service.istio.io labels, else the recommended
// Kubernetes labels, else app/version, else the workload name and "latest".
func epCanonicalService(syms *index.Symbols, sets *index.LabelSets, labels index.LabelSetID, workload string) (string, string) {
	name := workload
	for _, key := range [...]string{"service.istio.io/canonical-name", "app.kubernetes.io/name", "app"} {
		if v, ok := epLabelValue(syms, sets, labels, key); ok {
			name = v
			break
		}
	}
	rev := "latest"
	for _, key := range [...]string{"service.istio.io/canonical-revision", "app.kubernetes.io/version", "version"} {
		if v, ok := epLabelValue(syms, sets, labels, key); ok {
			rev = v
			break
		}
	}
	return name, rev
}
