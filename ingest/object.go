package ingest

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Position is where a document or field starts in its file (lines are
// 1-based; 0 means unknown).
type Position struct {
	File string
	Line int
}

// String renders "file:line", or just the part that is known.
func (p Position) String() string {
	switch {
	case p.Line <= 0:
		return p.File
	case p.File == "":
		return "line " + strconv.Itoa(p.Line)
	default:
		return p.File + ":" + strconv.Itoa(p.Line)
	}
}

// Object is one decoded configuration object.
type Object struct {
	Kind Kind
	// APIVersion as written, e.g. "networking.istio.io/v1beta1".
	APIVersion string
	// Meta is the object's metadata; Namespace is defaulted to "default" for
	// namespaced kinds and empty for cluster-scoped ones.
	Meta metav1.ObjectMeta
	// Pos is the file and line where the document starts.
	Pos Position
	// Spec is, for Kubernetes kinds, the whole typed object
	// (*corev1.Service, *discoveryv1.EndpointSlice, *corev1.Pod,
	// *corev1.Namespace); for Istio kinds the spec message of istio.io/api
	// (*networkingv1alpha3.VirtualService, *securityv1beta1.AuthorizationPolicy, ...).
	Spec any
	// Hash is, for an object decoded from a file, the xxhash of its
	// canonical JSON (name, namespace, labels, annotations and spec): the
	// file source's change detection. Formatting, comments, field order and
	// status (of Istio kinds) do not change it. Objects from an API server
	// have none. It is not a row's hash: the converter hashes a config row
	// over what it reads (configHash).
	Hash uint64

	// src lets Validate find the line of a field after the fact. It holds
	// the document's text, not its parsed tree: the text is about a tenth of
	// the tree's size and is parsed again only when an object has errors.
	src *source
}

// source is the text of the document an object came from.
type source struct {
	text string // the document's chunk of the file (or the List holding the object)
	line int    // line of text's first line in the file
	doc  int    // index of the document in text (a chunk rarely holds more than one)
	item int    // index in the List's items, or -1
}

// ObjectKey identifies an object; it is comparable, for maps.
type ObjectKey struct {
	Kind      Kind
	Namespace string
	Name      string
}

// Key returns the object's identity.
func (o *Object) Key() ObjectKey {
	return ObjectKey{Kind: o.Kind, Namespace: o.Meta.Namespace, Name: o.Meta.Name}
}

// String renders "Kind namespace/name" (or "Kind name" when cluster-scoped).
func (k ObjectKey) String() string {
	if k.Namespace == "" {
		return k.Kind.String() + " " + k.Name
	}
	return k.Kind.String() + " " + k.Namespace + "/" + k.Name
}
