package ingest

import (
	"encoding/json"
	"fmt"
	"google.golang.org/protobuf/types/known/structpb"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	extensionsv1alpha1 "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	telemetryv1 "istio.io/client-go/pkg/apis/telemetry/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// The machinery of the row-hash tests (convert_hash_test.go,
// kube_hash_test.go): every field of every Istio spec found by walking its
// proto descriptor, every field a Kubernetes transform keeps found by
// walking the transformed object, the two ways an object reaches the
// converter, and a probe that reports what the index tells the engine.

// setter sets one field of a message (and the messages on the way to it)
// to a value that is not the default; alt picks a second value, for a
// base that already holds the first.
type setter struct {
	path string
	set  func(m protoreflect.Message, alt bool)
}

// specSetters walks md: one setter per field, and per field of every
// message reachable from it (a message already on the path ends the walk:
// no spec kind recurses today).
func specSetters(md protoreflect.MessageDescriptor) []setter {
	return messageSetters(md, nil)
}

func messageSetters(md protoreflect.MessageDescriptor, stack []protoreflect.FullName) []setter {
	if slices.Contains(stack, md.FullName()) {
		return nil
	}
	stack = append(stack, md.FullName())
	if md.FullName() == "google.protobuf.Struct" {
		// A free-form value (an EnvoyFilter patch's): one key set, as a
		// Value without a kind is no JSON at all.
		fd := md.Fields().ByName("fields")
		return []setter{{"fields{}", func(m protoreflect.Message, alt bool) {
			v := structpb.NewStringValue(scalarValue(fd.MapKey(), alt).String())
			m.Mutable(fd).Map().Set(protoreflect.ValueOfString("probe").MapKey(), protoreflect.ValueOfMessage(v.ProtoReflect()))
		}}}
	}
	var out []setter
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := fd.JSONName()
		switch {
		case fd.IsMap():
			vd := fd.MapValue()
			entry := func(m protoreflect.Message, alt bool) protoreflect.Map {
				return m.Mutable(fd).Map()
			}
			key := func(alt bool) protoreflect.MapKey { return scalarValue(fd.MapKey(), alt).MapKey() }
			if vd.Message() == nil {
				out = append(out, setter{name + "{}", func(m protoreflect.Message, alt bool) {
					entry(m, alt).Set(key(alt), scalarValue(vd, alt))
				}})
				continue
			}
			out = append(out, setter{name + "{}", func(m protoreflect.Message, alt bool) {
				mp := entry(m, alt)
				mp.Set(key(alt), mp.NewValue())
			}})
			for _, s := range messageSetters(vd.Message(), stack) {
				out = append(out, setter{name + "{}." + s.path, func(m protoreflect.Message, alt bool) {
					mp := entry(m, alt)
					v := mp.NewValue()
					s.set(v.Message(), alt)
					mp.Set(key(alt), v)
				}})
			}
		case fd.IsList():
			if fd.Message() == nil {
				out = append(out, setter{name + "[]", func(m protoreflect.Message, alt bool) {
					m.Mutable(fd).List().Append(scalarValue(fd, alt))
				}})
				continue
			}
			out = append(out, setter{name + "[]", func(m protoreflect.Message, alt bool) {
				m.Mutable(fd).List().AppendMutable()
			}})
			// A field of an element is set on the base's first element if
			// it has one (whose other fields keep it valid for the API
			// server), else on a new one.
			for _, s := range messageSetters(fd.Message(), stack) {
				out = append(out, setter{name + "[]." + s.path, func(m protoreflect.Message, alt bool) {
					l := m.Mutable(fd).List()
					if l.Len() > 0 {
						s.set(l.Get(0).Message(), alt)
						return
					}
					s.set(l.AppendMutable().Message(), alt)
				}})
			}
		case fd.Message() != nil:
			// Present and empty: replaces what the base holds.
			out = append(out, setter{name, func(m protoreflect.Message, alt bool) {
				m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
			}})
			for _, s := range messageSetters(fd.Message(), stack) {
				out = append(out, setter{name + "." + s.path, func(m protoreflect.Message, alt bool) {
					s.set(m.Mutable(fd).Message(), alt)
				}})
			}
		default:
			out = append(out, setter{name, func(m protoreflect.Message, alt bool) {
				m.Set(fd, scalarValue(fd, alt))
			}})
		}
	}
	return out
}

// scalarValue is a value of fd's type that is not its default (for an
// enum without another value, its only one: a field with presence, such as
// a oneof member, is then set all the same).
func scalarValue(fd protoreflect.FieldDescriptor, alt bool) protoreflect.Value {
	n := int64(7)
	s := "x7.example.com"
	if alt {
		n, s = 9, "y9.example.com"
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		var nonzero []protoreflect.EnumNumber
		for i := range vals.Len() {
			if v := vals.Get(i).Number(); v != 0 {
				nonzero = append(nonzero, v)
			}
		}
		switch {
		case len(nonzero) == 0:
			return protoreflect.ValueOfEnum(0)
		case alt:
			return protoreflect.ValueOfEnum(nonzero[len(nonzero)-1])
		default:
			return protoreflect.ValueOfEnum(nonzero[0])
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if fd.FullName() == "google.protobuf.Duration.nanos" {
			return protoreflect.ValueOfInt32(int32(n) * 1e6) // the CRDs refuse durations under 1ms
		}
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.5)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(s))
	}
	panic("scalarValue: " + fd.Kind().String())
}

// istioTyped returns a new client-go object of an Istio kind, as an
// informer decodes it, with its metadata and its spec message.
func istioTyped(k Kind) (runtime.Object, *metav1.ObjectMeta, proto.Message) {
	var obj runtime.Object
	var meta *metav1.ObjectMeta
	var spec proto.Message
	switch k {
	case KindVirtualService:
		o := &networkingv1.VirtualService{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindDestinationRule:
		o := &networkingv1.DestinationRule{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindGateway:
		o := &networkingv1.Gateway{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindSidecar:
		o := &networkingv1.Sidecar{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindServiceEntry:
		o := &networkingv1.ServiceEntry{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindWorkloadEntry:
		o := &networkingv1.WorkloadEntry{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindEnvoyFilter:
		o := &networkingv1alpha3.EnvoyFilter{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindWasmPlugin:
		o := &extensionsv1alpha1.WasmPlugin{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindTelemetry:
		o := &telemetryv1.Telemetry{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindAuthorizationPolicy:
		o := &securityv1.AuthorizationPolicy{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindPeerAuthentication:
		o := &securityv1.PeerAuthentication{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	case KindRequestAuthentication:
		o := &securityv1.RequestAuthentication{}
		obj, meta, spec = o, &o.ObjectMeta, &o.Spec
	default:
		panic("istioTyped: " + k.String())
	}
	for _, ik := range istioKinds {
		if ik.kind == k {
			obj.GetObjectKind().SetGroupVersionKind(groupVersionKind(ik.groupVersion, k))
		}
	}
	return obj, meta, spec
}

// istioObjectOf builds a client-go object of kind k from meta and spec.
func istioObjectOf(k Kind, meta metav1.ObjectMeta, spec proto.Message) runtime.Object {
	obj, m, s := istioTyped(k)
	*m = meta
	proto.Merge(s, spec)
	return obj
}

// specOf returns the spec message of a client-go Istio object.
func specOf(obj runtime.Object) proto.Message {
	o, ok := kubeObject(obj)
	if !ok {
		panic(fmt.Sprintf("specOf %T", obj))
	}
	return o.Spec.(proto.Message)
}

// transformOf is the informer transform of kind k.
func transformOf(k Kind) cache.TransformFunc {
	for _, ck := range append(coreKinds[:len(coreKinds):len(coreKinds)], secretKind) {
		if ck.kind == k {
			return ck.transform
		}
	}
	return transformIstio
}

// A leg is one way an object reaches the converter.
type leg struct {
	name   string
	object func(t *testing.T, k Kind, obj runtime.Object) *Object
}

var (
	// fileLeg: the object written as a JSON manifest, through Decode.
	fileLeg = leg{"file", func(t *testing.T, k Kind, obj runtime.Object) *Object {
		t.Helper()
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatalf("marshal %T: %v", obj, err)
		}
		objs, errs := Decode("hash.json", b)
		if len(errs) > 0 || len(objs) != 1 {
			t.Fatalf("decode %s: %d objects, errors %v", b, len(objs), errs)
		}
		return &objs[0]
	}}
	// kubeLeg: the object as an informer caches it: decoded from the JSON
	// an API server serves, through the kind's transform.
	kubeLeg = leg{"kubernetes", func(t *testing.T, k Kind, obj runtime.Object) *Object {
		t.Helper()
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatalf("marshal %T: %v", obj, err)
		}
		fresh := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
		if err := json.Unmarshal(b, fresh); err != nil {
			t.Fatalf("unmarshal %T: %v", obj, err)
		}
		return informerObject(t, k, fresh)
	}}
)

// informerObject is what the kube source converts of an object an
// informer received.
func informerObject(t *testing.T, k Kind, obj runtime.Object) *Object {
	t.Helper()
	cached, err := transformOf(k)(obj)
	if err != nil {
		t.Fatalf("transform %T: %v", obj, err)
	}
	o, ok := kubeObject(cached)
	if !ok {
		t.Fatalf("kubeObject %T", cached)
	}
	return o
}

// rowProbe converts objects into an index of its own, as a source does,
// and reports what the index tells the engine.
type rowProbe struct {
	w    *index.Writer
	conv *Converter
}

// probeNode is a Node whose locality the probes know, as the kube
// source's converter does (the file source has no Nodes).
const probeNode = "node-1"

// probeSymbols are the symbol and label-set tables every probe shares: an
// index row's hash covers symbol IDs, which must not depend on which probe
// interned a string first for rows of two probes to compare.
var probeSymbols = index.NewWriter()

func newRowProbe() *rowProbe {
	w := index.NewWriterSharing(probeSymbols)
	p := &rowProbe{w: w, conv: NewConverter(w, "cluster.local")}
	p.conv.setNodeLocality(probeNode, "region-1/zone-1")
	return p
}

// put converts o and reports whether the index published a change.
func (p *rowProbe) put(o *Object) bool {
	var b index.Batch
	p.conv.Put(&b, o)
	return !p.w.Apply(&b).Empty()
}

// rows renders every row of the snapshot with its hash, sorted.
func (p *rowProbe) rows() string { return snapshotRows(p.w.Snapshot()) }

func snapshotRows(s *index.Snapshot) string {
	var out []string
	str := s.String
	s.Namespaces(func(n *index.Namespace) bool {
		out = append(out, fmt.Sprintf("namespace %s %x", str(n.Name), n.Hash))
		return true
	})
	s.Workloads(func(w *index.Workload) bool {
		out = append(out, fmt.Sprintf("workload %s/%s %x", str(w.Key.Namespace), str(w.Key.Name), w.Hash))
		return true
	})
	s.Services(func(_ index.ServiceID, v *index.Service) bool {
		out = append(out, fmt.Sprintf("service %s/%s %x", str(v.Key.Namespace), str(v.Key.Host), v.Hash))
		return true
	})
	s.EndpointShards(func(e *index.EndpointShard) bool {
		out = append(out, fmt.Sprintf("endpoints %s/%s %x", str(e.Service.Namespace), str(e.Service.Host), e.Hash))
		return true
	})
	for k := range index.NumConfigKinds {
		s.Configs(index.ConfigKind(k), func(c *index.Config) bool {
			out = append(out, fmt.Sprintf("config %d %s/%s %x", k, str(c.Key.Namespace), str(c.Key.Name), c.Hash))
			return true
		})
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// keptLeaves lists the fields of v that are set, by path ("Spec.Ports[].Name"),
// down to leaves: scalars, maps, and structs with no exported field
// (netip.Addr) or that are one value (intstr.IntOrString). skip names
// fields left out at any depth (ObjectMeta: the metadata tests cover it).
func keptLeaves(v reflect.Value, path string, skip map[string]bool, out map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			keptLeaves(v.Elem(), path, skip, out)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Len() > 0 {
				out[path] = true
			}
			return
		}
		for i := range v.Len() {
			keptLeaves(v.Index(i), path+"[]", skip, out)
		}
	case reflect.Struct:
		if t := v.Type(); t == reflect.TypeFor[intstr.IntOrString]() || t == reflect.TypeFor[netip.Addr]() {
			if !v.IsZero() {
				out[path] = true
			}
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || skip[f.Name] {
				continue
			}
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			keptLeaves(v.Field(i), p, skip, out)
		}
	default:
		if !v.IsZero() {
			out[path] = true
		}
	}
}

// fill sets every exported field of v reachable from it, recursively, to
// a value that is not zero: one element per slice, one entry per map.
func fill(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), depth+1)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("fill"))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() || v.Type() == reflect.TypeFor[metav1.MicroTime]() {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.String:
		v.SetString("fill")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(3)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(3)
	}
}
