package inject

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// patchOp is one RFC 6902 operation; Value (null included) is written
// for every op but remove.
type patchOp struct {
	Op    string
	Path  string
	Value any
}

// createPatch is the JSON patch that turns from (a pod's JSON form,
// numbers as json.Number) into to's JSON. Objects
// are diffed key by key; a list whose length changed is replaced whole
// (containers, volumes), one of the same length is diffed element by
// element. The ops are in key order, so the patch is deterministic.
func createPatch(a any, to *corev1.Pod) ([]byte, error) {
	b, err := jsonValue(to)
	if err != nil {
		return nil, err
	}
	ops := diff(nil, "", a, b)
	if ops == nil {
		ops = []patchOp{}
	}
	return appendPatch(make([]byte, 0, 4<<10), ops)
}

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

func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b) // numbers as json.Number: they compare and re-encode exactly
}

func diff(ops []patchOp, path string, a, b any) []patchOp {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return append(ops, replaceOp(path, b))
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := path + "/" + escapePointer(k)
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inB:
				ops = append(ops, patchOp{Op: "remove", Path: p})
			case !inA:
				ops = append(ops, addOp(p, y))
			default:
				ops = diff(ops, p, x, y)
			}
		}
		return ops
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return append(ops, replaceOp(path, b))
		}
		for i := range av {
			ops = diff(ops, path+"/"+strconv.Itoa(i), av[i], bv[i])
		}
		return ops
	default:
		if !reflect.DeepEqual(a, b) {
			ops = append(ops, replaceOp(path, b))
		}
		return ops
	}
}

func addOp(path string, v any) patchOp {
	return patchOp{Op: "add", Path: path, Value: v}
}

func replaceOp(path string, v any) patchOp {
	return patchOp{Op: "replace", Path: path, Value: v}
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
