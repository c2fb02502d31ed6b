package ingest

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Row hashes cover every field a converter reads: these tests change each
// one, on the objects of both sources (a manifest through Decode, and the
// JSON an API server serves through the informer's transform), and check
// that the index reports the change. kube_hash_test.go does the same
// against a real API server.

func groupVersionKind(groupVersion string, k Kind) k8sschema.GroupVersionKind {
	return k8sschema.FromAPIVersionAndKind(groupVersion, k.String())
}

var legs = []leg{fileLeg, kubeLeg}

// istioBaseSpecs are valid specs (for pilotfish's validation and the
// CRDs' schemas) the field walk sets one field on at a time.
var istioBaseSpecs = map[Kind]string{
	KindVirtualService: `{"hosts":["reviews"],
		"http":[{"match":[{"uri":{"prefix":"/"}}],"route":[{"destination":{"host":"reviews","subset":"v1","port":{"number":9080}}}]}],
		"tcp":[{"match":[{"port":9090}],"route":[{"destination":{"host":"reviews","port":{"number":9090}}}]}],
		"tls":[{"match":[{"port":443,"sniHosts":["reviews"]}],"route":[{"destination":{"host":"reviews","port":{"number":443}}}]}]}`,
	KindDestinationRule: `{"host":"reviews",
		"trafficPolicy":{"loadBalancer":{"simple":"ROUND_ROBIN"},"portLevelSettings":[{"port":{"number":9080},"loadBalancer":{"simple":"LEAST_REQUEST"}}]},
		"subsets":[{"name":"v1","labels":{"version":"v1"},
			"trafficPolicy":{"portLevelSettings":[{"port":{"number":9080},"loadBalancer":{"simple":"RANDOM"}}]}}]}`,
	KindGateway: `{"selector":{"istio":"ingressgateway"},
		"servers":[{"port":{"number":443,"name":"https","protocol":"HTTPS"},"hosts":["*"],"tls":{"mode":"SIMPLE","credentialName":"cert"}}]}`,
	KindSidecar: `{"egress":[{"hosts":["./*"],"port":{"number":9080,"protocol":"HTTP","name":"http"}}],
		"ingress":[{"port":{"number":9080,"protocol":"HTTP","name":"http"},"defaultEndpoint":"127.0.0.1:8080"}]}`,
	KindServiceEntry: `{"hosts":["ext.example.com"],"ports":[{"number":443,"name":"tls","protocol":"TLS","targetPort":8443}],
		"resolution":"STATIC","location":"MESH_EXTERNAL","endpoints":[{"address":"10.1.0.1","ports":{"tls":8443},"labels":{"app":"ext"}}]}`,
	KindWorkloadEntry: `{"address":"10.0.0.1","ports":{"http":8080},"labels":{"app":"vm"}}`,
	KindAuthorizationPolicy: `{"action":"DENY","rules":[{"from":[{"source":{"principals":["cluster.local/ns/a/sa/b"]}}],
		"to":[{"operation":{"paths":["/admin"]}}],"when":[{"key":"request.headers[x-user]","values":["y"]}]}]}`,
	KindPeerAuthentication: `{"selector":{"matchLabels":{"app":"reviews"}},"mtls":{"mode":"STRICT"},"portLevelMtls":{"8080":{"mode":"PERMISSIVE"}}}`,
	KindRequestAuthentication: `{"selector":{"matchLabels":{"app":"reviews"}},"jwtRules":[{"issuer":"https://issuer.example.com",
		"jwksUri":"https://issuer.example.com/jwks","fromHeaders":[{"name":"x-jwt","prefix":"Bearer "}],
		"outputClaimToHeaders":[{"header":"x-claim","claim":"sub"}]}]}`,
	KindEnvoyFilter: `{"workloadSelector":{"labels":{"app":"reviews"}},"priority":3,"configPatches":[{"applyTo":"CLUSTER",
		"match":{"context":"SIDECAR_OUTBOUND","cluster":{"service":"reviews.shop.svc.cluster.local"}},
		"patch":{"operation":"MERGE","value":{"connect_timeout":"3s"}}}]}`,
	KindWasmPlugin: `{"selector":{"matchLabels":{"app":"reviews"}},"url":"oci://ghcr.io/example/authn:v1","sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"imagePullPolicy":"Always","imagePullSecret":"pull","pluginConfig":{"a":"b"},"pluginName":"root","phase":"AUTHN","priority":3,
		"failStrategy":"FAIL_OPEN","vmConfig":{"env":[{"name":"A","value":"b"}]},"match":[{"mode":"SERVER","ports":[{"number":9080}]}],"type":"HTTP"}`,
	KindTelemetry: `{"selector":{"matchLabels":{"app":"reviews"}},"accessLogging":[{"providers":[{"name":"envoy"}],
		"filter":{"expression":"response.code >= 400"},"match":{"mode":"SERVER"}}],"metrics":[{"providers":[{"name":"prometheus"}],
		"reportingInterval":"15s","overrides":[{"match":{"metric":"REQUEST_COUNT","mode":"CLIENT"},
		"tagOverrides":{"a":{"operation":"UPSERT","value":"b"}}}]}],"tracing":[{"providers":[{"name":"zipkin"}],
		"randomSamplingPercentage":10,"customTags":{"t":{"literal":{"value":"v"}}}}]}`,
}

// istioKindList is every Istio kind, in Kind order.
func istioKindList() []Kind {
	var out []Kind
	for k := KindUnknown + 1; k < numKinds; k++ {
		if kinds[k].istio() {
			out = append(out, k)
		}
	}
	return out
}

func baseMeta(k Kind) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: "hash", Labels: map[string]string{"app": "reviews"}}
	if kinds[k].namespaced {
		m.Namespace = "shop"
	}
	return m
}

// istioBase is kind k's base object.
func istioBase(t testing.TB, k Kind) runtime.Object {
	t.Helper()
	src, ok := istioBaseSpecs[k]
	if !ok {
		t.Fatalf("no base spec for %s: add one to istioBaseSpecs", k)
	}
	obj, meta, spec := istioTyped(k)
	*meta = baseMeta(k)
	if err := protojson.Unmarshal([]byte(src), spec); err != nil {
		t.Fatalf("%s base spec: %v", k, err)
	}
	return obj
}

// kubeBase is kind k's base object, for the Kubernetes kinds.
func kubeBase(t testing.TB, k Kind) runtime.Object {
	t.Helper()
	m := baseMeta(k)
	var obj runtime.Object
	switch k {
	case KindService:
		obj = &corev1.Service{ObjectMeta: m, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Selector: map[string]string{"app": "reviews"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 9080, TargetPort: intstr.FromInt32(8080),
				Protocol: corev1.ProtocolTCP}}}}
	case KindEndpointSlice:
		m.Labels = map[string]string{labelServiceName: "reviews"}
		obj = &discoveryv1.EndpointSlice{ObjectMeta: m, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: ptr.To(probeNode),
				Zone: ptr.To("zone-a"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
	case KindPod:
		obj = &corev1.Pod{ObjectMeta: m,
			Spec: corev1.PodSpec{NodeName: probeNode, ServiceAccountName: "reviews",
				Containers: []corev1.Container{{Name: "app", Image: "reviews"}}},
			Status: corev1.PodStatus{PodIP: "10.244.0.5", PodIPs: []corev1.PodIP{{IP: "10.244.0.5"}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	case KindNamespace:
		obj = &corev1.Namespace{ObjectMeta: m}
	case KindSecret:
		m.Labels = nil
		obj = &corev1.Secret{ObjectMeta: m, Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}}
	default:
		t.Fatalf("kubeBase %s", k)
	}
	obj.GetObjectKind().SetGroupVersionKind(groupVersionKind(kinds[k].apiVersions(), k))
	return obj
}

// base is kind k's base object.
func base(t testing.TB, k Kind) runtime.Object {
	if kinds[k].istio() {
		return istioBase(t, k)
	}
	return kubeBase(t, k)
}

// variantOf is base with setter s applied to its spec; ok is false when
// neither of s's values differs from what base holds.
func variantOf(k Kind, base runtime.Object, s setter) (runtime.Object, bool) {
	for _, alt := range []bool{false, true} {
		v := base.DeepCopyObject()
		s.set(specOf(v).ProtoReflect(), alt)
		if !proto.Equal(specOf(v), specOf(base)) {
			return v, true
		}
	}
	return nil, false
}

// TestRowHashCoversIstioSpecs: setting any field of any Istio spec, found
// by walking the spec's proto descriptor (so a field added to istio.io/api
// is covered the day it is), is a change the index reports, from a
// manifest and from the API server's JSON, and so is setting it back; the
// file source's own change hash moves too; and both sources give every
// variant the same rows.
func TestRowHashCoversIstioSpecs(t *testing.T) {
	for _, k := range istioKindList() {
		t.Run(k.String(), func(t *testing.T) {
			b := istioBase(t, k)
			setters := specSetters(specOf(b).ProtoReflect().Descriptor())
			probes := make([]*rowProbe, len(legs))
			for i, l := range legs {
				probes[i] = newRowProbe()
				probes[i].put(l.object(t, k, b))
			}
			if r0, r1 := probes[0].rows(), probes[1].rows(); r0 != r1 {
				t.Fatalf("the base object's rows differ by source:\n file %s\n kube %s", r0, r1)
			}
			baseFileHash := fileLeg.object(t, k, b).Hash
			seen := map[string]string{}
			for _, s := range setters {
				v, ok := variantOf(k, b, s)
				if !ok {
					t.Errorf("%s: cannot set to a value other than the base's", s.path)
					continue
				}
				if fileLeg.object(t, k, v).Hash == baseFileHash {
					t.Errorf("%s: the file source's object hash does not move", s.path)
				}
				var rows [2]string
				for i, l := range legs {
					if !probes[i].put(l.object(t, k, v)) {
						t.Errorf("%s, %s: setting it is no change to the index", l.name, s.path)
					}
					rows[i] = probes[i].rows()
					if !probes[i].put(l.object(t, k, b)) {
						t.Errorf("%s, %s: setting it back is no change to the index", l.name, s.path)
					}
				}
				if rows[0] != rows[1] {
					t.Errorf("%s: rows differ by source:\n file %s\n kube %s", s.path, rows[0], rows[1])
				}
				if other, dup := seen[rows[0]]; dup {
					t.Errorf("%s and %s give the same rows", other, s.path)
				}
				seen[rows[0]] = s.path
			}
			t.Logf("%d fields", len(setters))
		})
	}
}

// annotationValues are two values of each annotation a converter reads
// that mean different things (the Pod's status annotation is read only for
// being set).
var annotationValues = map[string][2]string{
	annotationExport: {".", "*"},
	annotationStatus: {"", `{"containers":["istio-proxy"]}`},
	annotationDryRun: {"false", "true"},
}

// labelsRead says which labels kind k's converter reads: nil for all of
// them.
func labelsRead(k Kind) (keys []string, all bool) {
	switch k {
	case KindEndpointSlice:
		return []string{labelServiceName}, false
	case KindSecret:
		return nil, false
	}
	return nil, true
}

// metaChange is a change to an object's metadata.
type metaChange struct {
	name  string
	from  func(*metav1.ObjectMeta)
	to    func(*metav1.ObjectMeta)
	moves bool // whether the converter reads it
}

func setAnnotation(key, value string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = value
	}
}

// metaChanges lists, for kind k, a change to each part of the metadata a
// converter reads, and to parts it does not.
func metaChanges(t testing.TB, k Kind) []metaChange {
	t.Helper()
	nop := func(*metav1.ObjectMeta) {}
	out := []metaChange{
		{"name", nop, func(m *metav1.ObjectMeta) { m.Name = "other" }, true},
		{"unread annotation", nop, setAnnotation("example.com/note", "x"), false},
		{"resourceVersion", nop, func(m *metav1.ObjectMeta) { m.ResourceVersion = "99" }, false},
	}
	if kinds[k].namespaced {
		out = append(out, metaChange{"namespace", nop, func(m *metav1.ObjectMeta) { m.Namespace = "other" }, true})
	}
	if keys, all := labelsRead(k); all {
		out = append(out,
			metaChange{"label added", nop, func(m *metav1.ObjectMeta) { m.Labels["version"] = "v1" }, true},
			metaChange{"label value", nop, func(m *metav1.ObjectMeta) { m.Labels["app"] = "ratings" }, true})
	} else {
		for _, key := range keys {
			out = append(out, metaChange{"label " + key, nop, func(m *metav1.ObjectMeta) { m.Labels[key] = "ratings" }, true})
		}
		out = append(out, metaChange{"unread label", nop, func(m *metav1.ObjectMeta) {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels["example.com/team"] = "x"
		}, false})
	}
	for _, a := range readAnnotations[k] {
		vals, ok := annotationValues[a]
		if !ok {
			t.Fatalf("annotation %s is read but annotationValues has no values for it", a)
		}
		out = append(out, metaChange{"annotation " + a, setAnnotation(a, vals[0]), setAnnotation(a, vals[1]), true})
	}
	if kinds[k].istio() {
		// A config row keeps the generation (configz shows it).
		out = append(out, metaChange{"generation", func(m *metav1.ObjectMeta) { m.Generation = 1 },
			func(m *metav1.ObjectMeta) { m.Generation = 2 }, true})
	}
	return out
}

func withMeta(obj runtime.Object, change func(*metav1.ObjectMeta)) runtime.Object {
	c := obj.DeepCopyObject()
	m := reflect.ValueOf(c).Elem().FieldByName("ObjectMeta").Addr().Interface().(*metav1.ObjectMeta)
	change(m)
	return c
}

// TestRowHashCoversMetadata: for every kind, a change to what its
// converter reads of the metadata (namespace, name, the labels it reads,
// each annotation of readAnnotations, a config row's generation) is a
// change the index reports, from a manifest and from the API server's
// JSON; a change to anything else of it is none, and the informer's cache
// does not keep an annotation no converter reads.
func TestRowHashCoversMetadata(t *testing.T) {
	for k := KindUnknown + 1; k < numKinds; k++ {
		t.Run(k.String(), func(t *testing.T) {
			b := base(t, k)
			for _, c := range metaChanges(t, k) {
				from := withMeta(b, c.from)
				to := withMeta(from, c.to)
				for _, l := range legs {
					p := newRowProbe()
					p.put(l.object(t, k, from))
					if got := p.put(l.object(t, k, to)); got != c.moves {
						t.Errorf("%s, %s: index reports a change = %v, want %v", l.name, c.name, got, c.moves)
					}
				}
				if c.name == "unread annotation" {
					if o := kubeLeg.object(t, k, to); len(o.Meta.Annotations) != 0 {
						t.Errorf("the informer's cache keeps annotations no converter reads: %v", o.Meta.Annotations)
					}
				}
			}
		})
	}
}
