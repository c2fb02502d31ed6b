package ingest

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	istioscheme "istio.io/client-go/pkg/clientset/versioned/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// What Decode does with a kind it does not read depends on its API group:
//
//   - A mesh group (one pilotfish reads kinds of, or whose kinds configure
//     the mesh: the core group, discovery.k8s.io, networking.k8s.io,
//     Istio's groups, the Gateway API's) without such a kind: an error at
//     the document's kind, with the closest kind of the group suggested
//     ("VirtualServize": did you mean "VirtualService"?). The object would
//     otherwise vanish without a word. Other built-in groups (apps, batch,
//     policy, ...) are not checked: a kind removed from Kubernetes
//     (policy/v1beta1 PodSecurityPolicy) or added after the client-go
//     pilotfish is built with is no concern of the mesh, and must not fail
//     `pilotfish validate`.
//   - Real mesh configuration pilotfish does not implement (Telemetry,
//     ProxyConfig, WorkloadGroup, the Gateway API's
//     kinds, Ingress, IstioOperator): a warning, since whoever wrote it
//     expects it to change traffic.
//   - Any other built-in Kubernetes kind (ConfigMap, ServiceAccount,
//     Deployment, Node, ...): skipped silently. Manifest directories hold
//     whole applications; these say nothing about the mesh.
//   - A group pilotfish knows nothing of (another project's CRDs): skipped
//     silently, as there is no list of kinds to check against.

// kindClass is what Decode does with a kind it does not read.
type kindClass uint8

const (
	kindForeign       kindClass = iota // unknown group: skipped
	kindMisspelled                     // known group, no such kind: an error
	kindNotMesh                        // a built-in Kubernetes kind: skipped
	kindUnimplemented                  // mesh config pilotfish does not implement: a warning
)

// groupKinds are the kinds of one API group.
type groupKinds struct {
	class map[string]kindClass // kindNotMesh or kindUnimplemented
	names []string             // the group's object kinds, for suggestions
	mesh  bool                 // a kind it lacks is an error (a mesh group)
}

// meshGroups are the Kubernetes groups whose kinds are checked; Istio's
// groups and those of extraMeshKinds are too.
var meshGroups = []string{"", "discovery.k8s.io", "networking.k8s.io"}

// Mesh kinds no scheme linked here registers. The Gateway API's standard
// and experimental kinds, and Istio's installation kind.
var extraMeshKinds = map[string][]string{
	"gateway.networking.k8s.io":   {"Gateway", "GatewayClass", "HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute", "ReferenceGrant", "BackendTLSPolicy", "ListenerSet"},
	"gateway.networking.x-k8s.io": {"XListenerSet", "XBackendTrafficPolicy", "XMesh"},
	"install.istio.io":            {"IstioOperator"},
}

// apiKinds are registered in every group version of a scheme; they are not
// objects anyone writes in a manifest.
var apiKinds = []string{"APIGroup", "APIVersions", "CreateOptions", "DeleteOptions", "GetOptions",
	"ListOptions", "PatchOptions", "UpdateOptions", "Status", "WatchEvent"}

// knownGroups is built once from the schemes of client-go (every built-in
// Kubernetes kind) and istio.io/client-go (every Istio kind).
var knownGroups = sync.OnceValue(func() map[string]*groupKinds {
	groups := map[string]*groupKinds{}
	add := func(group, kind string, c kindClass) {
		g := groups[group]
		if g == nil {
			g = &groupKinds{class: map[string]kindClass{}}
			groups[group] = g
		}
		if old, ok := g.class[kind]; ok && old >= c {
			return
		}
		g.class[kind] = c
		if !slices.Contains(apiKinds, kind) && !strings.HasSuffix(kind, "List") && !slices.Contains(g.names, kind) {
			g.names = append(g.names, kind)
		}
	}
	fromScheme := func(s *runtime.Scheme, c kindClass) {
		for gvk := range s.AllKnownTypes() {
			kc := c
			if slices.Contains(apiKinds, gvk.Kind) || strings.HasSuffix(gvk.Kind, "List") {
				kc = kindNotMesh
			}
			add(gvk.Group, gvk.Kind, kc)
		}
	}
	fromScheme(kubescheme.Scheme, kindNotMesh)
	fromScheme(istioscheme.Scheme, kindUnimplemented)
	for gvk := range istioscheme.Scheme.AllKnownTypes() {
		groups[gvk.Group].mesh = true
	}
	for group, ks := range extraMeshKinds {
		for _, k := range ks {
			add(group, k, kindUnimplemented)
			add(group, k+"List", kindNotMesh)
		}
		groups[group].mesh = true
	}
	for _, group := range meshGroups {
		groups[group].mesh = true
	}
	// istiod serves Ingress (also under its old group); pilotfish does not.
	add("networking.k8s.io", "Ingress", kindUnimplemented)
	add("extensions", "Ingress", kindUnimplemented)
	add("", "List", kindNotMesh)
	for k := KindUnknown + 1; k < numKinds; k++ {
		add(kinds[k].group, kinds[k].name, kindNotMesh) // read: a suggestion, never classified
	}
	for _, g := range groups {
		slices.Sort(g.names)
	}
	return groups
})

// classifyKind says what to do with a group and kind pilotfish does not
// read; for a misspelling it returns the suggestion ("" or ` (did you mean
// "X"?)`).
func classifyKind(group, kind string) (kindClass, string) {
	g := knownGroups()[group]
	if g == nil {
		return kindForeign, ""
	}
	if c, ok := g.class[kind]; ok {
		return c, ""
	}
	if !g.mesh {
		return kindForeign, ""
	}
	return kindMisspelled, suggest(kind, g.names)
}

// groupName is how messages name an API group.
func groupName(group string) string {
	if group == "" {
		return "the core API group (v1)"
	}
	return "API group " + group
}

// notRead reports a document of a kind pilotfish does not read, as its
// class says: an error, a warning, or nothing.
func (d *decoder) notRead(r *reporter, apiVersion, kind string) {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		if knownGroups()[apiVersion] != nil && apiVersion != "" {
			r.add(ErrTypeMeta, (*fieldPath)(nil).f("apiVersion"),
				fmt.Sprintf("%q has no version: write group/version, e.g. %s/v1", apiVersion, apiVersion))
			return
		}
		group = ""
	}
	switch c, hint := classifyKind(group, kind); c {
	case kindMisspelled:
		r.add(ErrKind, (*fieldPath)(nil).f("kind"), fmt.Sprintf("unknown kind %q in %s%s", kind, groupName(group), hint))
	case kindUnimplemented:
		d.warns = append(d.warns, &Error{Pos: Position{File: r.file, Line: r.docLine}, Kind: kind,
			Namespace: r.namespace, Name: r.name, cause: ErrIgnored, unsupported: unsupportedKind,
			Message: "not implemented by pilotfish (" + apiVersion + "); the object is ignored"})
	}
}
