package ingest

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// fieldCase changes one field of a Kubernetes kind's base object in a way
// its converter tells apart. leaf is the field as keptLeaves names it in
// the transformed object ("" for one the transform does not keep because
// the API server never serves it, such as a Secret's stringData).
type fieldCase struct {
	name, leaf string
	from, to   func(runtime.Object) // from may be nil
	fileOnly   bool
}

func svc(f func(*corev1.Service)) func(runtime.Object) {
	return func(o runtime.Object) { f(o.(*corev1.Service)) }
}

func slice(f func(*discoveryv1.EndpointSlice)) func(runtime.Object) {
	return func(o runtime.Object) { f(o.(*discoveryv1.EndpointSlice)) }
}

func pod(f func(*corev1.Pod)) func(runtime.Object) {
	return func(o runtime.Object) { f(o.(*corev1.Pod)) }
}

func ep(f func(*discoveryv1.Endpoint)) func(runtime.Object) {
	return slice(func(s *discoveryv1.EndpointSlice) { f(&s.Endpoints[0]) })
}

// kubeFieldCases are, by kind, a change to each field its transform keeps.
func kubeFieldCases() map[Kind][]fieldCase {
	port := func(f func(*corev1.ServicePort)) func(runtime.Object) {
		return svc(func(s *corev1.Service) { f(&s.Spec.Ports[0]) })
	}
	slicePort := func(f func(*discoveryv1.EndpointPort)) func(runtime.Object) {
		return slice(func(s *discoveryv1.EndpointSlice) { f(&s.Ports[0]) })
	}
	draining := ep(func(e *discoveryv1.Endpoint) {
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	})
	secret := []fieldCase{}
	for _, key := range credentialKeys {
		secret = append(secret,
			fieldCase{"data " + key, "Data", nil, func(o runtime.Object) { o.(*corev1.Secret).Data[key] = []byte("NEW") }, false},
			fieldCase{"stringData " + key, "", nil, func(o runtime.Object) {
				o.(*corev1.Secret).StringData = map[string]string{key: "NEW"}
			}, true})
	}
	docker := func(o runtime.Object) {
		s := o.(*corev1.Secret)
		s.Type, s.Data[corev1.DockerConfigJsonKey] = corev1.SecretTypeDockerConfigJson, []byte("{}")
	}
	secret = append(secret,
		fieldCase{"type", "Type", docker, func(o runtime.Object) { o.(*corev1.Secret).Type = corev1.SecretTypeOpaque }, false},
		fieldCase{"data .dockerconfigjson", "Data", docker, func(o runtime.Object) {
			o.(*corev1.Secret).Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{}}`) // the API server checks the JSON
		}, false},
		fieldCase{"stringData .dockerconfigjson", "", docker, func(o runtime.Object) {
			o.(*corev1.Secret).StringData = map[string]string{corev1.DockerConfigJsonKey: `{"auths":{}}`}
		}, true})
	return map[Kind][]fieldCase{
		KindService: {
			{"type", "Spec.Type", nil, svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }), false},
			{"clusterIP", "Spec.ClusterIP", svc(func(s *corev1.Service) { s.Spec.ClusterIPs = nil }),
				svc(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.11" }), false},
			{"clusterIPs", "Spec.ClusterIPs[]", nil, svc(func(s *corev1.Service) { s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::10") }), false},
			{"port name", "Spec.Ports[].Name", nil, port(func(p *corev1.ServicePort) { p.Name = "grpc" }), false},
			{"port protocol", "Spec.Ports[].Protocol", nil, port(func(p *corev1.ServicePort) { p.Protocol = corev1.ProtocolUDP }), false},
			{"port appProtocol", "Spec.Ports[].AppProtocol", nil, port(func(p *corev1.ServicePort) { p.AppProtocol = ptr.To("kubernetes.io/h2c") }), false},
			{"port", "Spec.Ports[].Port", nil, port(func(p *corev1.ServicePort) { p.Port = 9081 }), false},
			{"targetPort", "Spec.Ports[].TargetPort", nil, port(func(p *corev1.ServicePort) { p.TargetPort = intstr.FromInt32(8081) }), false},
			{"selector", "Spec.Selector", nil, svc(func(s *corev1.Service) { s.Spec.Selector["app"] = "ratings" }), false},
			{"externalName", "Spec.ExternalName", svc(func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ServiceTypeExternalName, "a.example.com", "", nil
			}), svc(func(s *corev1.Service) { s.Spec.ExternalName = "b.example.com" }), false},
		},
		KindEndpointSlice: {
			{"addressType", "AddressType", nil, slice(func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeFQDN }), false},
			{"port name", "Ports[].Name", nil, slicePort(func(p *discoveryv1.EndpointPort) { p.Name = ptr.To("grpc") }), false},
			{"port", "Ports[].Port", nil, slicePort(func(p *discoveryv1.EndpointPort) { p.Port = ptr.To[int32](8081) }), false},
			{"port appProtocol", "Ports[].AppProtocol", nil, slicePort(func(p *discoveryv1.EndpointPort) { p.AppProtocol = ptr.To("grpc") }), false},
			{"address", "Endpoints[].Addr", nil, ep(func(e *discoveryv1.Endpoint) { e.Addresses = []string{"10.244.0.6"} }), false},
			{"more addresses", "Endpoints[].More[]", nil, ep(func(e *discoveryv1.Endpoint) { e.Addresses = append(e.Addresses, "10.244.0.7") }), false},
			{"nodeName", "Endpoints[].Node", nil, ep(func(e *discoveryv1.Endpoint) { e.NodeName = ptr.To("node-2") }), false},
			{"zone", "Endpoints[].Zone", ep(func(e *discoveryv1.Endpoint) { e.NodeName = nil }),
				ep(func(e *discoveryv1.Endpoint) { e.Zone = ptr.To("zone-b") }), false},
			{"ready", "Endpoints[].Ready", nil, ep(func(e *discoveryv1.Endpoint) { e.Conditions.Ready = ptr.To(false) }), false},
			{"serving", "Endpoints[].Serving", draining, ep(func(e *discoveryv1.Endpoint) { e.Conditions.Serving = ptr.To(false) }), false},
			{"terminating", "Endpoints[].Terminating", draining, ep(func(e *discoveryv1.Endpoint) { e.Conditions.Terminating = ptr.To(false) }), false},
		},
		KindPod: {
			{"nodeName", "NodeName", nil, pod(func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }), false},
			{"serviceAccountName", "ServiceAccount", nil, pod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "ratings" }), false},
			{"podIP", "PodIP", nil, pod(func(p *corev1.Pod) {
				p.Status.PodIP, p.Status.PodIPs = "10.244.0.6", []corev1.PodIP{{IP: "10.244.0.6"}}
			}), false},
			{"ready", "Ready", nil, pod(func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }), false},
		},
		KindSecret:    secret,
		KindNamespace: nil, // its converter reads metadata only
	}
}

// filledObject is an object of kind k with every field set
// (fill), plus what fill cannot make up: values the transform keys on.
func filledObject(k Kind) runtime.Object {
	var obj runtime.Object
	switch k {
	case KindService:
		obj = &corev1.Service{}
	case KindEndpointSlice:
		obj = &discoveryv1.EndpointSlice{}
	case KindPod:
		obj = &corev1.Pod{}
	case KindNamespace:
		obj = &corev1.Namespace{}
	case KindSecret:
		obj = &corev1.Secret{}
	}
	fill(reflect.ValueOf(obj), 0)
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		o.Endpoints[0].Addresses = []string{"10.0.0.1", "10.0.0.2"} // fill's "fill" is no address
	case *corev1.Pod:
		o.Status.Conditions[0].Type, o.Status.Conditions[0].Status = corev1.PodReady, corev1.ConditionTrue
	case *corev1.Secret:
		o.Data = map[string][]byte{credentialKeys[0]: []byte("x")} // fill's key is no credential
	}
	return obj
}

// TestRowHashCoversKubeFields: every field a Kubernetes kind's transform
// keeps (found by filling every field of the object and listing what the
// transform left set, so that a field a transform starts keeping needs a
// case here) is one its converter reads: changing it is a change the index
// reports, from a manifest and from the API server's JSON.
func TestRowHashCoversKubeFields(t *testing.T) {
	cases := kubeFieldCases()
	for k := KindUnknown + 1; k < numKinds; k++ {
		if kinds[k].istio() {
			continue
		}
		t.Run(k.String(), func(t *testing.T) {
			kc, ok := cases[k]
			if !ok {
				t.Fatalf("no field cases for %s", k)
			}
			cached, err := transformOf(k)(filledObject(k))
			if err != nil {
				t.Fatal(err)
			}
			kept := map[string]bool{}
			keptLeaves(reflect.ValueOf(cached), "", map[string]bool{"ObjectMeta": true, "TypeMeta": true}, kept)
			covered := map[string]bool{}
			for _, c := range kc {
				if c.leaf != "" {
					covered[c.leaf] = true
				}
			}
			for _, f := range slices.Sorted(maps.Keys(kept)) {
				if !covered[f] {
					t.Errorf("the transform keeps %s but no case changes it", f)
				}
			}
			for _, f := range slices.Sorted(maps.Keys(covered)) {
				if !kept[f] {
					t.Errorf("a case changes %s, which the transform does not keep", f)
				}
			}
			b := kubeBase(t, k)
			for _, c := range kc {
				from := b.DeepCopyObject()
				if c.from != nil {
					c.from(from)
				}
				to := from.DeepCopyObject()
				c.to(to)
				for _, l := range legs {
					if c.fileOnly && l.name != fileLeg.name {
						continue
					}
					p := newRowProbe()
					p.put(l.object(t, k, from))
					if !p.put(l.object(t, k, to)) {
						t.Errorf("%s, %s: changing it is no change to the index", l.name, c.name)
					}
				}
			}
		})
	}
}

// TestAnnotationsReachTheRows: each annotation a converter reads has its
// effect on the row from both sources (a dry-run AuthorizationPolicy from
// the API server is not enforced).
func TestAnnotationsReachTheRows(t *testing.T) {
	for _, tc := range []struct {
		kind       Kind
		annotation string
		value      string
		check      func(*index.Snapshot) bool
	}{
		{KindAuthorizationPolicy, annotationDryRun, "true", func(s *index.Snapshot) bool {
			c := configsOf(s, index.ConfigAuthorizationPolicy)
			return len(c) == 1 && c[0].DryRun
		}},
		{KindService, annotationExport, ".", func(s *index.Snapshot) bool {
			found := false
			s.Services(func(_ index.ServiceID, v *index.Service) bool { found = v.ExportTo.Private; return false })
			return found
		}},
		{KindPod, annotationStatus, `{"containers":["istio-proxy"]}`, func(s *index.Snapshot) bool {
			found := false
			s.Workloads(func(w *index.Workload) bool { found = w.TLSMode == index.TLSModeIstio; return false })
			return found
		}},
	} {
		if !slices.Contains(readAnnotations[tc.kind], tc.annotation) {
			t.Errorf("%s: readAnnotations lacks %s", tc.kind, tc.annotation)
		}
		for _, l := range legs {
			without, with := base(t, tc.kind), withMeta(base(t, tc.kind), setAnnotation(tc.annotation, tc.value))
			p := newRowProbe()
			p.put(l.object(t, tc.kind, without))
			if tc.check(p.w.Snapshot()) {
				t.Errorf("%s, %s: the effect of %s without it", l.name, tc.kind, tc.annotation)
			}
			p.put(l.object(t, tc.kind, with))
			if !tc.check(p.w.Snapshot()) {
				t.Errorf("%s, %s: %s=%s has no effect on the row", l.name, tc.kind, tc.annotation, tc.value)
			}
		}
	}
}
