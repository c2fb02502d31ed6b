package encode

import (
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// epLabels are the values of the labels endpoint metadata reads, found
// in one pass over a label set by comparing key strings: looking the keys
// up as symbols instead would make the answer depend on whether a string
// had been interned yet.
type epLabels struct {
	podTemplateHash string
	// name and rev hold the canonical name and revision candidates in
	// order of precedence (service.istio.io/*, app.kubernetes.io/*, then
	// app and version); has marks those present.
	name, rev       [3]string
	hasName, hasRev [3]bool
}

func epLabelsOf(n index.Names, id index.LabelSetID) epLabels {
	var l epLabels
	if id == 0 {
		return l
	}
	for _, lb := range n.Labels(id) {
		switch n.String(lb.Key) {
		case "pod-template-hash":
			l.podTemplateHash = n.String(lb.Value)
		case "service.istio.io/canonical-name":
			l.name[0], l.hasName[0] = n.String(lb.Value), true
		case "app.kubernetes.io/name":
			l.name[1], l.hasName[1] = n.String(lb.Value), true
		case "app":
			l.name[2], l.hasName[2] = n.String(lb.Value), true
		case "service.istio.io/canonical-revision":
			l.rev[0], l.hasRev[0] = n.String(lb.Value), true
		case "app.kubernetes.io/version":
			l.rev[1], l.hasRev[1] = n.String(lb.Value), true
		case "version":
			l.rev[2], l.hasRev[2] = n.String(lb.Value), true
		}
	}
	return l
}

// epWorkloadName is the workload an endpoint belongs to, as istiod reports
// it: a Deployment's pods report the Deployment (the pod name up to its
// ReplicaSet's pod-template-hash); other workloads their own name.
func epWorkloadName(n index.Names, labels index.LabelSetID, name string) string {
	return epCutWorkloadName(name, epLabelsOf(n, labels).podTemplateHash)
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
func epCanonicalService(n index.Names, labels index.LabelSetID, workload string) (string, string) {
	l := epLabelsOf(n, labels)
	name, ok, rev := l.canonical()
	if !ok {
		name = workload
	}
	return name, rev
}

// canonical is the label part of epCanonicalService: the canonical name
// when a label gives one (ok), and the revision ("latest" when none).
func (l *epLabels) canonical() (name string, ok bool, rev string) {
	for i := range l.name {
		if l.hasName[i] {
			name, ok = l.name[i], true
			break
		}
	}
	rev = "latest"
	for i := range l.rev {
		if l.hasRev[i] {
			rev = l.rev[i]
			break
		}
	}
	return name, ok, rev
}
