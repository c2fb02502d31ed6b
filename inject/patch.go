package inject

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ops); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // numbers compare and re-encode exactly
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
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

// addOp and replaceOp carry a null value explicitly (omitempty would drop
// it, and "add" without a value is not a valid operation).
func addOp(path string, v any) patchOp {
	return patchOp{Op: "add", Path: path, Value: nullable{v}}
}

func replaceOp(path string, v any) patchOp {
	return patchOp{Op: "replace", Path: path, Value: nullable{v}}
}

type nullable struct{ v any }

func (n nullable) MarshalJSON() ([]byte, error) { return json.Marshal(n.v) }

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
