package ingest

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Per-object limits, Kubernetes' own, so that what a config directory
// holds would also be accepted by an API server (and the reverse), and so
// that no single object can make the server hold more than the API server
// would let it.
const (
	// maxObjectSize bounds an object's canonical JSON (what Decode hashes:
	// name, namespace, labels, annotations and the body): 1.5 MiB, etcd's
	// default request limit, the largest object an API server stores.
	maxObjectSize = 3 << 19
	// maxAnnotationsSize bounds the total length of an object's annotation
	// keys and values: 256 KiB, the API server's TotalAnnotationSizeLimitB.
	maxAnnotationsSize = 256 << 10
)

func objectSizeMessage(size int) string {
	return fmt.Sprintf("object is %d bytes as JSON, over Kubernetes' limit of %d (1.5 MiB)", size, maxObjectSize)
}

// annotationsSize is the size the API server counts: keys plus values.
func annotationsSize(m *metav1.ObjectMeta) int {
	n := 0
	for k, v := range m.Annotations {
		n += len(k) + len(v)
	}
	return n
}

// checkAnnotationsSize reports annotations over maxAnnotationsSize.
func (v *validator) checkAnnotationsSize(m *metav1.ObjectMeta) {
	if n := annotationsSize(m); n > maxAnnotationsSize {
		v.errorf((*fieldPath)(nil).f("metadata").f("annotations"),
			"annotations total %d bytes, over Kubernetes' limit of %d (256 KiB)", n, maxAnnotationsSize)
	}
}
