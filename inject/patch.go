package inject

import (
	"bytes"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// patchOp is one RFC 6902 operation; Value (null included) is written
// for every op but remove.
type patchOp struct {
	Op    string
	Path  string
	Value any
}

// createPatch is the JSON patch that turns from's JSON into to's
// (typedPatch). The ops are in field and key order, so the patch is
// deterministic.
func createPatch(from, to *corev1.Pod) ([]byte, error) {
	vals := patchValues.Get().(*bytes.Buffer)
	defer func() {
		if vals.Cap() <= 1<<20 {
			vals.Reset()
			patchValues.Put(vals)
		}
	}()
	ops, err := typedPatch(from, to, vals)
	if err != nil {
		return nil, err
	}
	return appendPatch(make([]byte, 0, vals.Len()+len(ops)*96+2), ops)
}

// patchValues hold a patch's values while it is written.
var patchValues = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// appendPatch encodes ops, each value's object keys sorted (the patch is
// deterministic). encoding/json would marshal each value twice (once in
// MarshalJSON, then compacting its output), a quarter of a patch's cost.
func appendPatch(dst []byte, ops []patchOp) ([]byte, error) {
	var err error
	dst = append(dst, '[')
	for i, op := range ops {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"op":`...)
		dst = appendJSONString(dst, op.Op)
		dst = append(dst, `,"path":`...)
		dst = appendJSONString(dst, op.Path)
		if op.Op != "remove" {
			dst = append(dst, `,"value":`...)
			if dst, err = appendJSONSorted(dst, op.Value); err != nil {
				return nil, err
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
