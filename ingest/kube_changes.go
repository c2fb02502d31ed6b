package ingest

import (
	"maps"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// changed reports whether an informer update may change what the
// converter produces. Both objects are transformed, so fields the
// converter does not read are gone already; what remains is compared
// without the resourceVersion (which every write bumps).
func changed(old, obj any) bool {
	om, ok1 := old.(metav1.Object)
	nm, ok2 := obj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	if rv := nm.GetResourceVersion(); rv != "" && rv == om.GetResourceVersion() {
		return false // a resync or a relist of an unchanged object
	}
	_, oldStub := old.(*kubeStub)
	_, newStub := obj.(*kubeStub)
	if oldStub || newStub {
		return true // a namespace left or joined the selection (kube_stub.go)
	}
	switch n := obj.(type) {
	case *kubePod:
		o, ok := old.(*kubePod)
		return !ok || o.NodeName != n.NodeName || o.ServiceAccount != n.ServiceAccount ||
			o.PodIP != n.PodIP || o.Ready != n.Ready || !sameMeta(&o.ObjectMeta, &n.ObjectMeta)
	case *kubeNode:
		o, ok := old.(*kubeNode)
		return !ok || o.Locality != n.Locality
	case *corev1.Service:
		o, ok := old.(*corev1.Service)
		return !ok || !sameMeta(&o.ObjectMeta, &n.ObjectMeta) || !reflect.DeepEqual(o.Spec, n.Spec)
	case *kubeSlice:
		o, ok := old.(*kubeSlice)
		return !ok || !sameMeta(&o.ObjectMeta, &n.ObjectMeta) || o.AddressType != n.AddressType ||
			!reflect.DeepEqual(o.Ports, n.Ports) || !reflect.DeepEqual(o.Endpoints, n.Endpoints)
	case *corev1.Namespace:
		o, ok := old.(*corev1.Namespace)
		return !ok || !sameMeta(&o.ObjectMeta, &n.ObjectMeta)
	}
	// Istio kinds: their CRDs have a status subresource, so the generation
	// moves exactly when the spec does; the rest is metadata: labels and
	// the annotations the converter reads (an istio.io/dry-run flip).
	return om.GetGeneration() == 0 || !sameMeta(om, nm)
}

// sameMeta compares what trimMeta keeps, resourceVersion aside.
func sameMeta(a, b metav1.Object) bool {
	return a.GetName() == b.GetName() && a.GetNamespace() == b.GetNamespace() &&
		a.GetGeneration() == b.GetGeneration() && maps.Equal(a.GetLabels(), b.GetLabels()) &&
		maps.Equal(a.GetAnnotations(), b.GetAnnotations())
}

// sliceOnNodes reports whether an EndpointSlice has an endpoint on one of
// the nodes.
func sliceOnNodes(obj any, nodes map[string]bool) bool {
	es, ok := obj.(*kubeSlice)
	if !ok {
		return false
	}
	for _, e := range es.Endpoints {
		if e.Node != "" && nodes[e.Node] {
			return true
		}
	}
	return false
}

// setNodeLocality records a node's locality ("" when it has none or is
// gone) and reports whether it changed.
func (c *Converter) setNodeLocality(node, locality string) bool {
	if c.nodes == nil {
		c.nodes = map[string]string{}
	}
	old, known := c.nodes[node]
	if locality == "" {
		delete(c.nodes, node)
		return known
	}
	c.nodes[node] = locality
	return !known || old != locality
}

// endpointLocality is an EndpointSlice endpoint's "region/zone[/subzone]":
// its node's, with the slice's zone hint where the node has no zone label;
// "/zone" when its node is unknown (the file source has no Nodes).
func (c *Converter) endpointLocality(nodeName, zone *string) string {
	if nodeName != nil {
		if loc, ok := c.nodes[*nodeName]; ok {
			if zone != nil && *zone != "" {
				region, rest, _ := strings.Cut(loc, "/")
				if nodeZone, subzone, _ := strings.Cut(rest, "/"); nodeZone == "" {
					if subzone != "" {
						return region + "/" + *zone + "/" + subzone
					}
					return region + "/" + *zone
				}
			}
			return loc
		}
	}
	if zone != nil && *zone != "" {
		return "/" + *zone
	}
	return ""
}
