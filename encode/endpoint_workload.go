package encode

import (
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// epLabelKeys are the label keys endpoint metadata reads, resolved to
// symbols once per generation (0: never interned, so no endpoint has it).
type epLabelKeys struct {
	podTemplateHash                   index.Sym
	canonicalName, k8sName, app       index.Sym
	canonicalRev, k8sVersion, version index.Sym
}

func epNewLabelKeys(syms *index.Symbols) epLabelKeys {
	l := func(s string) index.Sym { v, _ := syms.Lookup(s); return v }
	return epLabelKeys{
		podTemplateHash: l("pod-template-hash"),
		canonicalName:   l("service.istio.io/canonical-name"),
		k8sName:         l("app.kubernetes.io/name"),
		app:             l("app"),
		canonicalRev:    l("service.istio.io/canonical-revision"),
		k8sVersion:      l("app.kubernetes.io/version"),
		version:         l("version"),
	}
}

// epLabelValue returns the value of label key in set id, without allocating.
func epLabelValue(syms *index.Symbols, sets *index.LabelSets, id index.LabelSetID, key index.Sym) (string, bool) {
	if id == 0 || key == 0 {
		return "", false
	}
	for _, l := range sets.Get(id) {
		if l.Key == key {
			return syms.String(l.Value), true
		}
	}
	return "", false
}

// epWorkloadName is the workload an endpoint belongs to, as istiod reports
// it: a Deployment's pods report the Deployment (the pod name up to its
// ReplicaSet's pod-template-hash); other workloads their own name.
func epWorkloadName(syms *index.Symbols, sets *index.LabelSets, lk *epLabelKeys, labels index.LabelSetID, name string) string {
	h, _ := epLabelValue(syms, sets, labels, lk.podTemplateHash)
	return epCutWorkloadName(name, h)
}

// epCutWorkloadName cuts a pod name NAME-HASH-SUFFIX at the last "-HASH-"
// for the pod-template-hash h (no allocation); without h, or when the name
// does not have that shape, it is the name.
func epCutWorkloadName(name, h string) string {
	if h == "" {
		return name
	}
	for end := len(name); end > 0; {
		i := strings.LastIndex(name[:end], h)
		if i <= 0 {
			break
		}
		if name[i-1] == '-' && i+len(h) < len(name) && name[i+len(h)] == '-' && i-1 > 0 {
			return name[:i-1]
		}
		end = i
	}
	return name
}

// epCanonicalService is istiod's labels.CanonicalService: the canonical
// name and revision from the service.istio.io labels, else the recommended
// Kubernetes labels, else app/version, else the workload name and "latest".
func epCanonicalService(syms *index.Symbols, sets *index.LabelSets, lk *epLabelKeys, labels index.LabelSetID, workload string) (string, string) {
	name, ok, rev := epCanonicalLabels(syms, sets, lk, labels)
	if !ok {
		name = workload
	}
	return name, rev
}

// epCanonicalLabels is the label part of epCanonicalService: the canonical
// name when a label gives one (ok), and the revision ("latest" when none).
func epCanonicalLabels(syms *index.Symbols, sets *index.LabelSets, lk *epLabelKeys, labels index.LabelSetID) (name string, ok bool, rev string) {
	for _, key := range [...]index.Sym{lk.canonicalName, lk.k8sName, lk.app} {
		if v, found := epLabelValue(syms, sets, labels, key); found {
			name, ok = v, true
			break
		}
	}
	rev = "latest"
	for _, key := range [...]index.Sym{lk.canonicalRev, lk.k8sVersion, lk.version} {
		if v, found := epLabelValue(syms, sets, labels, key); found {
			rev = v
			break
		}
	}
	return name, ok, rev
}
