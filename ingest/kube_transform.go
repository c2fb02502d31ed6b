package ingest

import (
	"net/netip"
	"slices"
	"unique"

	extensionsv1alpha1 "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	telemetryv1 "istio.io/client-go/pkg/apis/telemetry/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// The informers' transform functions. An informer cache holds a copy of
// every object of its kind; these cut each object down to the fields the
// converter reads before it is cached, so the caches stay a small share of
// the heap: no managedFields, no annotations but those the converter
// reads (readAnnotations), no status or spec it ignores. Pods and Nodes, the most numerous
// and the largest objects, are replaced by small structs of their own
// (a corev1.Pod is 1,240 bytes before a single string or slice).
//
// Each transform is idempotent (client-go may pass it an object it has
// already transformed) and may mutate its input, which client-go owns
// exclusively at that point (client-go ≥ 1.27).

// kubePod is what the Pod informer caches: what the converter's Pod
// conversion reads, and nothing else.
type kubePod struct {
	metav1.ObjectMeta // name, namespace, labels, resourceVersion, sidecar.istio.io/status
	NodeName          string
	ServiceAccount    string
	PodIP             string // status.podIP; the converter keys workloads by the primary IP
	Ready             bool   // condition Ready is True
}

func (p *kubePod) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

func (p *kubePod) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// pod rebuilds the Pod the converter reads (it keeps no reference to it).
func (p *kubePod) pod() *corev1.Pod {
	ready := corev1.ConditionFalse
	if p.Ready {
		ready = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: p.ObjectMeta,
		Spec:       corev1.PodSpec{NodeName: p.NodeName, ServiceAccountName: p.ServiceAccount},
		Status: corev1.PodStatus{PodIP: p.PodIP,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
	}
}

// kubeNode is what the Node informer caches: its locality.
type kubeNode struct {
	metav1.ObjectMeta        // name and resourceVersion only
	Locality          string // "region/zone[/subzone]", "" when unlabelled
}

func (n *kubeNode) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

func (n *kubeNode) DeepCopyObject() runtime.Object {
	c := *n
	n.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// Node labels of locality, as istiod reads them (GA label first, then the
// deprecated beta one).
const (
	labelRegion       = "topology.kubernetes.io/region"
	labelZone         = "topology.kubernetes.io/zone"
	labelRegionBeta   = "failure-domain.beta.kubernetes.io/region"
	labelZoneBeta     = "failure-domain.beta.kubernetes.io/zone"
	labelSubzone      = "topology.istio.io/subzone"
	sidecarStatusMark = "injected" // stands in for sidecar.istio.io/status: only its presence is read
)

// nodeLocality is "region/zone/subzone" from a Node's labels, the subzone
// part left out when empty; "" when the node has none of them.
func nodeLocality(labels map[string]string) string {
	region := firstLabel(labels, labelRegion, labelRegionBeta)
	zone := firstLabel(labels, labelZone, labelZoneBeta)
	subzone := labels[labelSubzone]
	switch {
	case region == "" && zone == "" && subzone == "":
		return ""
	case subzone == "":
		return region + "/" + zone
	default:
		return region + "/" + zone + "/" + subzone
	}
}

func firstLabel(labels map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := labels[k]; v != "" {
			return v
		}
	}
	return ""
}

func transformPod(obj any) (any, error) {
	switch p := obj.(type) {
	case *kubePod:
		return p, nil
	case *corev1.Pod:
		out := &kubePod{ObjectMeta: trimMeta(KindPod, &p.ObjectMeta), NodeName: p.Spec.NodeName,
			ServiceAccount: p.Spec.ServiceAccountName, PodIP: p.Status.PodIP}
		out.Generation = 0
		if out.Annotations[annotationStatus] != "" {
			// Only whether it is set is read: its value, a JSON blob, goes
			// (the map is the input's or trimMeta's, both the transform's).
			out.Annotations[annotationStatus] = sidecarStatusMark
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				out.Ready = c.Status == corev1.ConditionTrue
			}
		}
		return out, nil
	}
	return obj, nil // a tombstone or an unexpected type: the handler decides
}

func transformNode(obj any) (any, error) {
	switch n := obj.(type) {
	case *kubeNode:
		return n, nil
	case *corev1.Node:
		return &kubeNode{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion},
			Locality:   nodeLocality(n.Labels),
		}, nil
	}
	return obj, nil
}

func transformService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	s.ObjectMeta = trimMeta(KindService, &s.ObjectMeta)
	ports := s.Spec.Ports
	for i := range ports {
		ports[i].NodePort = 0
	}
	s.Spec = corev1.ServiceSpec{
		Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs,
		Ports: ports, Selector: s.Spec.Selector, ExternalName: s.Spec.ExternalName,
	}
	s.Status = corev1.ServiceStatus{}
	return s, nil
}

// kubeSlice is what the EndpointSlice informer caches: 88 bytes per
// endpoint and no allocation of its own (a decoded endpoint is a 96-byte
// struct plus five small allocations: its address slice and string, node
// name and condition pointers), which makes the slice cache, the largest
// one, less than half its size.
type kubeSlice struct {
	metav1.ObjectMeta // name, namespace, resourceVersion, the service-name label
	AddressType       discoveryv1.AddressType
	Ports             []discoveryv1.EndpointPort
	Endpoints         []kubeEndpoint
}

// kubeEndpoint is one endpoint of a kubeSlice. Node and zone names are
// interned (unique.Make): a cluster has few of them.
type kubeEndpoint struct {
	Addr       netip.Addr
	More       []netip.Addr // the rare further addresses
	Node, Zone string
	// Ready, Serving, Terminating: 0 unset, 1 false, 2 true.
	Ready, Serving, Terminating uint8
}

func (s *kubeSlice) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

func (s *kubeSlice) DeepCopyObject() runtime.Object {
	c := *s
	s.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Ports = slices.Clone(s.Ports)
	c.Endpoints = slices.Clone(s.Endpoints)
	return &c
}

func triState(b *bool) uint8 {
	switch {
	case b == nil:
		return 0
	case *b:
		return 2
	default:
		return 1
	}
}

func fromTriState(v uint8) *bool {
	switch v {
	case 1:
		return ptr.To(false)
	case 2:
		return ptr.To(true)
	}
	return nil
}

func interned(s *string) string {
	if s == nil || *s == "" {
		return ""
	}
	return unique.Make(*s).Value()
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// slice rebuilds the EndpointSlice the converter reads (it keeps no
// reference to it).
func (s *kubeSlice) slice() *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: s.ObjectMeta, AddressType: s.AddressType, Ports: s.Ports,
		Endpoints: make([]discoveryv1.Endpoint, len(s.Endpoints))}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		addrs := make([]string, 0, 1+len(e.More))
		addrs = append(addrs, e.Addr.String())
		for _, a := range e.More {
			addrs = append(addrs, a.String())
		}
		es.Endpoints[i] = discoveryv1.Endpoint{Addresses: addrs, NodeName: optional(e.Node), Zone: optional(e.Zone),
			Conditions: discoveryv1.EndpointConditions{Ready: fromTriState(e.Ready), Serving: fromTriState(e.Serving),
				Terminating: fromTriState(e.Terminating)}}
	}
	return es
}

func transformEndpointSlice(obj any) (any, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil // a kubeSlice already, or a tombstone
	}
	out := &kubeSlice{ObjectMeta: trimMeta(KindEndpointSlice, &es.ObjectMeta), AddressType: es.AddressType, Ports: es.Ports}
	for i := range out.Ports {
		out.Ports[i].Protocol = nil // not read: a port's protocol comes from its appProtocol
	}
	out.Labels = nil
	if svc, ok := es.Labels[labelServiceName]; ok {
		out.Labels = map[string]string{labelServiceName: svc}
	}
	out.Endpoints = make([]kubeEndpoint, 0, len(es.Endpoints))
	for _, e := range es.Endpoints {
		ke := kubeEndpoint{Node: interned(e.NodeName), Zone: interned(e.Zone),
			Ready: triState(e.Conditions.Ready), Serving: triState(e.Conditions.Serving), Terminating: triState(e.Conditions.Terminating)}
		n := 0
		for _, a := range e.Addresses {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				continue // the converter skips it too (FQDN slices are not converted)
			}
			if n == 0 {
				ke.Addr = addr
			} else {
				ke.More = append(ke.More, addr)
			}
			n++
		}
		if n > 0 {
			out.Endpoints = append(out.Endpoints, ke)
		}
	}
	return out, nil
}

func transformNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	ns.ObjectMeta = trimMeta(KindNamespace, &ns.ObjectMeta)
	ns.Spec, ns.Status = corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
	return ns, nil
}

// transformIstio keeps an Istio object's spec and what its converter reads
// of its metadata (trimMeta); its status (written by istiod, not read)
// goes.
func transformIstio(obj any) (any, error) {
	switch o := obj.(type) {
	case *networkingv1.VirtualService:
		o.ObjectMeta = trimMeta(KindVirtualService, &o.ObjectMeta)
		o.Status.Reset()
	case *networkingv1.DestinationRule:
		o.ObjectMeta = trimMeta(KindDestinationRule, &o.ObjectMeta)
		o.Status.Reset()
	case *networkingv1.Gateway:
		o.ObjectMeta = trimMeta(KindGateway, &o.ObjectMeta)
		o.Status.Reset()
	case *networkingv1.Sidecar:
		o.ObjectMeta = trimMeta(KindSidecar, &o.ObjectMeta)
		o.Status.Reset()
	case *networkingv1alpha3.EnvoyFilter:
		o.ObjectMeta = trimMeta(KindEnvoyFilter, &o.ObjectMeta)
		o.Status.Reset()
	case *extensionsv1alpha1.WasmPlugin:
		o.ObjectMeta = trimMeta(KindWasmPlugin, &o.ObjectMeta)
		o.Status.Reset()
	case *telemetryv1.Telemetry:
		o.ObjectMeta = trimMeta(KindTelemetry, &o.ObjectMeta)
		o.Status.Reset()
	case *networkingv1.ServiceEntry:
		o.ObjectMeta = trimMeta(KindServiceEntry, &o.ObjectMeta)
		o.Status.Reset()
	case *networkingv1.WorkloadEntry:
		o.ObjectMeta = trimMeta(KindWorkloadEntry, &o.ObjectMeta)
		o.Status.Reset()
	case *securityv1.AuthorizationPolicy:
		o.ObjectMeta = trimMeta(KindAuthorizationPolicy, &o.ObjectMeta)
		o.Status.Reset()
	case *securityv1.PeerAuthentication:
		o.ObjectMeta = trimMeta(KindPeerAuthentication, &o.ObjectMeta)
		o.Status.Reset()
	case *securityv1.RequestAuthentication:
		o.ObjectMeta = trimMeta(KindRequestAuthentication, &o.ObjectMeta)
		o.Status.Reset()
	}
	return obj, nil
}
