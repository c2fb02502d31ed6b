package ingest_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

type wantObj struct {
	key  string // "Kind namespace/name"
	line int
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		file string
		in   string
		want []wantObj
		errs string // expected errors, one per line
	}{
		{
			name: "multi-document YAML with comments and empty documents",
			file: "a.yaml",
			in: `# leading comment
---
---
# a document of only comments

---
apiVersion: v1
kind: Service
metadata:
  name: reviews # trailing comment
spec:
  ports: [{port: 9080, name: http}]
---
~
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews}}]}]
...
`,
			want: []wantObj{{"Service default/reviews", 7}, {"VirtualService bookinfo/reviews", 16}},
		},
		{
			name: "Windows and old Mac line endings",
			file: "crlf.yaml",
			in: "apiVersion: v1\r\nkind: Namespace\r\nmetadata: {name: a}\r\n---\r\n" +
				"apiVersion: v1\rkind: Namespace\rmetadata: {name: b}\r---\r" +
				"apiVersion: v1\nkind: Namespace\nmetadata: {name: [c}\n",
			want: []wantObj{{"Namespace a", 1}, {"Namespace b", 5}},
			errs: "crlf.yaml:11: yaml: did not find expected ',' or ']'\n",
		},
		{
			name: "JSON document",
			file: "a.json",
			in: `{"apiVersion": "security.istio.io/v1", "kind": "PeerAuthentication",
 "metadata": {"name": "default", "namespace": "istio-system"},
 "spec": {"mtls": {"mode": "STRICT"}, "selector": {"matchLabels": {"app": "a\/b"}}}}`,
			want: []wantObj{{"PeerAuthentication istio-system/default", 1}},
		},
		{
			name: "List with items, unknown kinds skipped",
			file: "list.yaml",
			in: `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: skipped}
- apiVersion: v1
  kind: Namespace
  metadata: {name: bookinfo, namespace: ignored}
- apiVersion: networking.istio.io/v1beta1
  kind: Sidecar
  metadata: {name: default}
  spec: {egress: [{hosts: ["./*"]}]}
`,
			want: []wantObj{{"Namespace bookinfo", 7}, {"Sidecar default/default", 10}},
		},
		{
			name: "typed list whose items leave out apiVersion and kind",
			file: "svcs.yaml",
			in: `apiVersion: v1
kind: ServiceList
items:
- metadata: {name: a}
  spec: {ports: [{port: 80}]}
- metadata: {name: b}
  spec: {ports: [{port: 81}]}
`,
			want: []wantObj{{"Service default/a", 4}, {"Service default/b", 6}},
		},
		{
			name: "unknown kinds and groups are skipped silently",
			file: "skip.yaml",
			in: `apiVersion: v1
kind: ConfigMap
metadata: {name: x}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
---
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: knative}
`,
		},
		{
			name: "a syntax error loses only its own document",
			file: "broken.yaml",
			in: `apiVersion: v1
kind: Namespace
metadata: {name: one}
---
apiVersion: v1
kind: Namespace
metadata: {name: [two
---
apiVersion: v1
kind: Namespace
metadata: {name: three}
`,
			want: []wantObj{{"Namespace one", 1}, {"Namespace three", 9}},
			errs: "broken.yaml:7: yaml: did not find expected ',' or ']'\n",
		},
		{
			name: "missing apiVersion or kind, non-object documents",
			file: "typemeta.yaml",
			in: `metadata: {name: nothing}
---
kind: Gateway
metadata: {name: gw}
---
apiVersion: v1
metadata: {name: x}
---
- a list
---
just text
`,
			errs: `typemeta.yaml:1: missing apiVersion and kind
typemeta.yaml:3: Gateway gw: apiVersion: required
typemeta.yaml:6: kind: required
typemeta.yaml:9: document is a list, not an object with apiVersion and kind
typemeta.yaml:11: document is a scalar ("just text"), not an object with apiVersion and kind
`,
		},
		{
			name: "unknown API version of a known kind",
			file: "version.yaml",
			in: `apiVersion: networking.istio.io/v2
kind: VirtualService
metadata: {name: vs}
---
apiVersion: discovery.k8s.io/v1beta1
kind: EndpointSlice
metadata: {name: es, namespace: ns}
`,
			errs: `version.yaml:1: VirtualService default/vs: apiVersion: "networking.istio.io/v2" is not a supported version of VirtualService; use networking.istio.io/v1, networking.istio.io/v1beta1, networking.istio.io/v1alpha3
version.yaml:5: EndpointSlice ns/es: apiVersion: "discovery.k8s.io/v1beta1" is not a supported version of EndpointSlice; use discovery.k8s.io/v1
`,
		},
		{
			name: "schema errors name the field and its line",
			file: "schema.yaml",
			in: `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  lables: {app: x}
spec:
  Hosts: [reviews]
  http:
  - route:
    - destination:
        host: reviews
      weight: "fifty"
    timeout: 5
    match:
    - uri: {prefix: /a, exact: /b}
  tcp: {}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  ports:
  - port: "80"
    targetPort: [1]
  selector: {version: 1}
status: {loadBalancer: 7}
`,
			errs: `schema.yaml:5: VirtualService default/reviews: metadata.lables: unknown field (did you mean "labels"?)
schema.yaml:7: VirtualService default/reviews: spec.Hosts: unknown field (did you mean "hosts"?)
schema.yaml:12: VirtualService default/reviews: spec.http[0].route[0].weight: must be a whole number, not "fifty"
schema.yaml:13: VirtualService default/reviews: spec.http[0].timeout: must be a duration string such as "5s" or "1m30s", not a number (5)
schema.yaml:15: VirtualService default/reviews: spec.http[0].match[0].uri.prefix: cannot be set together with "exact": set only one of exact, prefix, regex
schema.yaml:16: VirtualService default/reviews: spec.tcp: must be a list, not an object
schema.yaml:23: Service default/svc: spec.ports[0].port: must be a number, not a string ("80")
schema.yaml:24: Service default/svc: spec.ports[0].targetPort: must be a number or a string, not a list
schema.yaml:25: Service default/svc: spec.selector[version]: must be a string, not a number (1)
schema.yaml:26: Service default/svc: status.loadBalancer: must be an object, not a number (7)
`,
		},
		{
			name: "duplicate keys",
			file: "dup.yaml",
			in: `apiVersion: v1
kind: Namespace
metadata:
  name: a
  name: b
`,
			errs: "dup.yaml:5: Namespace a: yaml: mapping key \"name\" already defined at line 4\n",
		},
		{
			name: "integer map keys and quoted numbers",
			file: "keys.yaml",
			in: `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: pa}
spec:
  selector: {matchLabels: {app: a}}
  portLevelMtls:
    8080: {mode: DISABLE}
    "9090": {mode: 1}
    http: {mode: STRICT}
`,
			errs: "keys.yaml:9: PeerAuthentication default/pa: spec.portLevelMtls[http]: must be a whole number, not \"http\"\n",
		},
		{
			name: "YAML anchors, aliases and merge keys",
			file: "anchors.yaml",
			in: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr}
spec:
  host: reviews
  subsets:
  - &v1 {name: v1, labels: {version: v1}}
  - <<: *v1
    name: v2
`,
			want: []wantObj{{"DestinationRule default/dr", 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, errs := ingest.Decode(tt.file, []byte(tt.in))
			var got []wantObj
			for _, o := range objs {
				got = append(got, wantObj{o.Key().String(), o.Pos.Line})
				if o.Pos.File != tt.file {
					t.Errorf("%v: Pos.File = %q, want %q", o.Key(), o.Pos.File, tt.file)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("objects:\n got %v\nwant %v", got, tt.want)
			}
			if g := errStrings(errs); g != tt.errs {
				t.Errorf("errors:\n got:\n%s\nwant:\n%s", g, tt.errs)
			}
			for _, err := range errs {
				asError(t, err)
			}
		})
	}
}

func TestDecodeKindsAndVersions(t *testing.T) {
	tests := []struct {
		apiVersion, kind string
		want             ingest.Kind
		spec             any
		namespace        string
	}{
		{"v1", "Service", ingest.KindService, &corev1.Service{}, "default"},
		{"v1", "Pod", ingest.KindPod, &corev1.Pod{}, "default"},
		{"v1", "Namespace", ingest.KindNamespace, &corev1.Namespace{}, ""},
		{"discovery.k8s.io/v1", "EndpointSlice", ingest.KindEndpointSlice, &discoveryv1.EndpointSlice{}, "default"},
		{"networking.istio.io/v1", "ServiceEntry", ingest.KindServiceEntry, &networking.ServiceEntry{}, "default"},
		{"networking.istio.io/v1beta1", "WorkloadEntry", ingest.KindWorkloadEntry, &networking.WorkloadEntry{}, "default"},
		{"networking.istio.io/v1alpha3", "VirtualService", ingest.KindVirtualService, &networking.VirtualService{}, "default"},
		{"networking.istio.io/v1", "DestinationRule", ingest.KindDestinationRule, &networking.DestinationRule{}, "default"},
		{"networking.istio.io/v1beta1", "Gateway", ingest.KindGateway, &networking.Gateway{}, "default"},
		{"networking.istio.io/v1alpha3", "Sidecar", ingest.KindSidecar, &networking.Sidecar{}, "default"},
		{"security.istio.io/v1", "AuthorizationPolicy", ingest.KindAuthorizationPolicy, &security.AuthorizationPolicy{}, "default"},
		{"security.istio.io/v1beta1", "PeerAuthentication", ingest.KindPeerAuthentication, &security.PeerAuthentication{}, "default"},
		{"security.istio.io/v1", "RequestAuthentication", ingest.KindRequestAuthentication, &security.RequestAuthentication{}, "default"},
	}
	versions := map[string][]string{
		"networking.istio.io": {"v1", "v1beta1", "v1alpha3"},
		"security.istio.io":   {"v1", "v1beta1"},
	}
	for _, tt := range tests {
		group, _, _ := strings.Cut(tt.apiVersion, "/")
		all := []string{tt.apiVersion}
		if vs, ok := versions[group]; ok {
			all = nil
			for _, v := range vs {
				all = append(all, group+"/"+v)
			}
		}
		for _, av := range all {
			t.Run(av+" "+tt.kind, func(t *testing.T) {
				in := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: x\n", av, tt.kind)
				objs, errs := ingest.Decode("k.yaml", []byte(in))
				if len(errs) > 0 || len(objs) != 1 {
					t.Fatalf("Decode: %d objects, errors %v", len(objs), errs)
				}
				o := objs[0]
				if o.Kind != tt.want || o.Kind.String() != tt.kind {
					t.Errorf("Kind = %v (%d), want %v", o.Kind, o.Kind, tt.want)
				}
				if o.APIVersion != av {
					t.Errorf("APIVersion = %q, want %q", o.APIVersion, av)
				}
				if reflect.TypeOf(o.Spec) != reflect.TypeOf(tt.spec) {
					t.Errorf("Spec is %T, want %T", o.Spec, tt.spec)
				}
				if o.Meta.Name != "x" || o.Meta.Namespace != tt.namespace {
					t.Errorf("Meta = %s/%s, want %s/x", o.Meta.Namespace, o.Meta.Name, tt.namespace)
				}
			})
		}
	}
}

func TestDecodeTypedValues(t *testing.T) {
	in := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: bookinfo
  labels: {app: reviews}
  annotations: {owner: team-a}
  generation: 3
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2, port: {number: 9080}}
      weight: 100
    timeout: 1m30s
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: bookinfo}
spec:
  ports: [{port: 9080, targetPort: http, name: http}]
`
	objs, errs := ingest.Decode("t.yaml", []byte(in))
	if len(errs) > 0 || len(objs) != 2 {
		t.Fatalf("Decode: %d objects, %v", len(objs), errs)
	}
	vs := objs[0].Spec.(*networking.VirtualService)
	route := vs.GetHttp()[0]
	if got := route.GetRoute()[0].GetDestination().GetPort().GetNumber(); got != 9080 {
		t.Errorf("port = %d", got)
	}
	if got := route.GetTimeout().AsDuration().String(); got != "1m30s" {
		t.Errorf("timeout = %s, want 1m30s (Go duration syntax, as istiod accepts)", got)
	}
	m := objs[0].Meta
	if m.Labels["app"] != "reviews" || m.Annotations["owner"] != "team-a" || m.Generation != 3 {
		t.Errorf("metadata = %+v", m)
	}
	svc := objs[1].Spec.(*corev1.Service)
	if svc.Spec.Ports[0].TargetPort.StrVal != "http" || svc.Namespace != "bookinfo" {
		t.Errorf("service = %+v", svc)
	}
}

func TestDecodeHash(t *testing.T) {
	base := `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr, labels: {a: b}}
spec: {host: reviews, subsets: [{name: v1, labels: {version: v1}}]}
`
	hash := func(t *testing.T, in string) uint64 {
		t.Helper()
		objs, errs := ingest.Decode("h.yaml", []byte(in))
		if len(errs) > 0 || len(objs) != 1 {
			t.Fatalf("Decode: %v", errs)
		}
		return objs[0].Hash
	}
	h := hash(t, base)
	same := map[string]string{
		"reformatted and reordered": `# a comment
kind: DestinationRule
apiVersion: networking.istio.io/v1beta1
spec:
  subsets:
  - labels:
      version: "v1"
    name: v1
  host: reviews
metadata:
  labels: {a: b}
  name: dr
  namespace: default
  resourceVersion: "42"
`,
		"status changed": base + "status: {observedGeneration: 7}\n",
	}
	for name, in := range same {
		t.Run(name, func(t *testing.T) {
			if got := hash(t, in); got != h {
				t.Errorf("hash changed: %x != %x", got, h)
			}
		})
	}
	different := map[string]string{
		"spec":        strings.Replace(base, "version: v1", "version: v2", 1),
		"label":       strings.Replace(base, "{a: b}", "{a: c}", 1),
		"name":        strings.Replace(base, "name: dr", "name: dr2", 1),
		"namespace":   strings.Replace(base, "{name: dr,", "{name: dr, namespace: other,", 1),
		"annotations": strings.Replace(base, "labels: {a: b}}", "labels: {a: b}, annotations: {x: y}}", 1),
		// The converter stamps a config row with its generation.
		"generation": strings.Replace(base, "labels: {a: b}}", "labels: {a: b}, generation: 3}", 1),
	}
	for name, in := range different {
		t.Run(name, func(t *testing.T) {
			if got := hash(t, in); got == h {
				t.Errorf("hash did not change")
			}
		})
	}
}

func TestDecodeSentinels(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"a: [", ingest.ErrSyntax},
		{"metadata: {name: x}", ingest.ErrTypeMeta},
		{"apiVersion: v2\nkind: Pod\nmetadata: {name: x}", ingest.ErrVersion},
		{"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {bogus: 1}", ingest.ErrSchema},
	}
	for _, tt := range tests {
		t.Run(tt.want.Error(), func(t *testing.T) {
			_, errs := ingest.Decode("s.yaml", []byte(tt.in))
			if len(errs) != 1 || !errors.Is(errs[0], tt.want) {
				t.Fatalf("errors %v, want one matching %v", errs, tt.want)
			}
		})
	}
}

// TestDecodeValidTestdata: the realistic manifests decode and validate
// without a single error.
func TestDecodeValidTestdata(t *testing.T) {
	r, err := ingest.ValidatePaths("testdata/valid")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) > 0 {
		t.Errorf("errors in valid manifests:\n%s", errStrings(r.Errors))
	}
	if len(r.Objects) != 24 {
		t.Errorf("only %d objects decoded: %v", len(r.Objects), r.Objects)
	}
}

// TestDecodeIstioBenchmarks: Istio's own benchmark workloads are valid
// Istio config, so pilotfish must accept them all. One exception:
// knative-gateway.yaml's template has no "---" before its {{- end }}, so from
// Services=2 on consecutive iterations run into one document with duplicate
// keys. istiod's benchmark parses with sigs.k8s.io/yaml (YAML 1.1, last key
// wins) and silently drops a VirtualService per iteration; pilotfish, like
// kubectl, rejects duplicate keys.
func TestDecodeIstioBenchmarks(t *testing.T) {
	workloads := benchWorkloads(t, 2)
	if workloads == nil {
		t.Skip(benchDir + " not found")
	}
	for name, data := range workloads {
		t.Run(name, func(t *testing.T) {
			objs, errs := ingest.Decode(name, data)
			for i := range objs {
				errs = append(errs, ingest.Validate(&objs[i])...)
			}
			if name == "knative-gateway.yaml" {
				for _, err := range errs {
					if !errors.Is(err, ingest.ErrSyntax) || !strings.Contains(err.Error(), "already defined") {
						t.Errorf("unexpected error %v", err)
					}
				}
				return
			}
			if len(errs) > 0 {
				t.Errorf("%s", errStrings(errs))
			}
		})
	}
}

func TestDecodeReadsTestdataFiles(t *testing.T) {
	data, err := os.ReadFile("testdata/valid/list.json")
	if err != nil {
		t.Fatal(err)
	}
	objs, errs := ingest.Decode("testdata/valid/list.json", data)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, o := range objs {
		got = append(got, fmt.Sprintf("%v@%d", o.Key(), o.Pos.Line))
	}
	want := []string{"Service bookinfo/details@5", "EndpointSlice bookinfo/details-x7k2p@11", "DestinationRule bookinfo/details@26"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
