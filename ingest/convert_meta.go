package ingest

import (
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a converter reads of an object's metadata is decided here, once,
// for both sources: name, namespace, labels, generation, an Istio
// object's creation time (index.Config.CreationTime), and the annotations
// of readAnnotations. The Kubernetes transforms keep exactly
// that (trimMeta), Converter.Put hands the converters an object whose
// annotations are cut down to it (converterView), and a config row's hash
// is computed over that view (configHash). So an annotation a converter
// reads is never stripped before it, and a change to it always changes the
// row's hash; an annotation no converter reads costs no memory in an
// informer cache and changes nothing.

// Annotations the converters read.
const (
	annotationExport = "networking.istio.io/exportTo" // Service: its exportTo
	annotationStatus = "sidecar.istio.io/status"      // Pod: injected, so its workload speaks mTLS
	annotationDryRun = "istio.io/dry-run"             // AuthorizationPolicy: shadow rules, not enforced
)

// readAnnotations lists, by kind, the annotations its converter reads. A
// converter that reads an annotation not listed here sees nothing (Put
// drops it); TestRowHashCoversMetadata checks that each one listed changes
// the row.
var readAnnotations = [numKinds][]string{
	KindService:             {annotationExport},
	KindPod:                 {annotationStatus},
	KindAuthorizationPolicy: {annotationDryRun},
}

// keptAnnotations returns the annotations of kind k's converter reads: a
// itself when it holds nothing else (no allocation), nil when it holds none
// of them.
func keptAnnotations(k Kind, a map[string]string) map[string]string {
	if len(a) == 0 {
		return nil
	}
	read := readAnnotations[k]
	n := 0
	for _, key := range read {
		if _, ok := a[key]; ok {
			n++
		}
	}
	switch {
	case n == 0:
		return nil
	case n == len(a):
		return a
	}
	out := make(map[string]string, n)
	for _, key := range read {
		if v, ok := a[key]; ok {
			out[key] = v
		}
	}
	return out
}

// trimMeta keeps what a converter of kind k reads of m (name, namespace,
// labels, generation, its annotations, an Istio object's creation time)
// and the resourceVersion the informers compare.
func trimMeta(k Kind, m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, Labels: m.Labels,
		ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		Annotations: keptAnnotations(k, m.Annotations),
	}
	if k >= KindServiceEntry && k <= KindRequestAuthentication || k == KindEnvoyFilter || k == KindWasmPlugin || k == KindTelemetry {
		out.CreationTimestamp = m.CreationTimestamp // Istio config: precedence
	}
	return out
}

// converterView is o with only the annotations its converter reads: o
// itself when it has no others (always, for an object of an informer
// cache), else a shallow copy.
func converterView(o *Object) *Object {
	kept := keptAnnotations(o.Kind, o.Meta.Annotations)
	if len(kept) == len(o.Meta.Annotations) {
		return o
	}
	v := *o
	v.Meta.Annotations = kept
	return &v
}

// configHash is a config row's hash: kind, namespace, name, labels,
// annotations, generation and spec of o, which must be a converterView,
// so it covers exactly what the converters read. The spec is hashed as
// its deterministic protobuf encoding, so two sources that decode the same
// object (a file's YAML, the API server's JSON) hash it alike. buf is
// scratch space for that encoding; the grown buffer is returned.
func configHash(o *Object, buf []byte) (uint64, []byte) {
	h := xxhash.New()
	var n [8]byte
	writeUint := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		_, _ = h.Write(n[:])
	}
	writeString := func(s string) {
		writeUint(uint64(len(s)))
		_, _ = h.WriteString(s)
	}
	writeMap := func(m map[string]string) {
		writeUint(uint64(len(m)))
		var stack [16]string
		keys := stack[:0]
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			writeString(k)
			writeString(m[k])
		}
	}
	writeUint(uint64(o.Kind))
	writeString(o.Meta.Namespace)
	writeString(o.Meta.Name)
	writeMap(o.Meta.Labels)
	writeMap(o.Meta.Annotations)
	writeUint(uint64(o.Meta.Generation))
	if t := o.Meta.CreationTimestamp; !t.IsZero() {
		// Precedence among VirtualServices (index.Config.CreationTime): an
		// object deleted and created again with the same spec moves.
		writeUint(uint64(t.UnixNano()))
	}
	if m, ok := o.Spec.(proto.Message); ok {
		var err error
		if buf, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(buf[:0], m); err != nil {
			// A message decoded from JSON always encodes; should it not,
			// the hash must still move with the spec.
			buf = append(buf[:0], err.Error()...)
		}
		writeUint(uint64(len(buf)))
		_, _ = h.Write(buf)
	}
	return h.Sum64(), buf
}
