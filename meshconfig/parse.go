package meshconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	meshv1 "istio.io/api/mesh/v1alpha1"
)

// MaxSize bounds a mesh config document (istiod's ConfigMaps are capped
// at 1 MiB by the API server; a file gets the same bound).
const MaxSize = 1 << 20

// maxProblems bounds the warnings one document yields.
const maxProblems = 64

// Parse reads a mesh config document (the `mesh` key of ConfigMap istio,
// or a --mesh-config file) as istiod's ApplyMeshConfigDefaults does:
// istiod's defaults, the document merged over them, istiod's validation.
// An empty document is the defaults. warnings are the unknown fields
// (istiod ignores them, and so does Parse); err is a *Problem (or several
// joined) naming the field and line, wrapping ErrInvalid.
func Parse(data []byte) (mc *meshv1.MeshConfig, warnings []*Problem, err error) {
	if len(data) > MaxSize {
		return nil, nil, &Problem{Message: fmt.Sprintf("%d bytes, over the %d-byte limit", len(data), MaxSize), cause: ErrInvalid}
	}
	root, err := parseTree(data)
	if err != nil {
		return nil, nil, err
	}
	if root == nil {
		mc = Defaults()
		return mc, nil, nil
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, &Problem{Message: err.Error(), cause: ErrInvalid}
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, nil, &Problem{Message: "not a mapping of MeshConfig fields: " + err.Error(), cause: ErrInvalid}
	}
	mc, err = apply(js, raw)
	if err != nil {
		return nil, nil, locate(root, raw, err)
	}
	warnings = unknownFields(root, mc.ProtoReflect().Descriptor())
	if probs := Validate(mc); len(probs) > 0 {
		for _, p := range probs {
			p.Line = lineOf(root, p.Field)
			if p.value != "" {
				p.Line = lineOfValue(root, strings.Split(p.Field, "[")[0], p.value)
			}
		}
		return nil, warnings, joinProblems(probs)
	}
	return mc, warnings, nil
}

// parseTree returns the document's top mapping (for lines), nil for an
// empty document.
func parseTree(data []byte) (*yaml3.Node, error) {
	var doc yaml3.Node
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			return nil, nil
		}
		return nil, &Problem{Message: "YAML: " + err.Error(), cause: ErrInvalid}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	n := deref(doc.Content[0])
	if n.Kind == yaml3.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml3.MappingNode {
		return nil, &Problem{Line: n.Line, Message: "not a mapping of MeshConfig fields", cause: ErrInvalid}
	}
	var extra yaml3.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Problem{Line: extra.Line, Message: "more than one YAML document", cause: ErrInvalid}
	}
	return n, nil
}

// locate turns a decoding error of the whole document into one naming the
// fields that fail: each top-level field (and each of defaultConfig's) is
// decoded alone over the defaults.
func locate(root *yaml3.Node, raw map[string]any, whole error) error {
	var probs []*Problem
	try := func(path string, v any, decode func([]byte) error) {
		b, err := json.Marshal(v)
		if err == nil {
			err = decode(b)
		}
		if err != nil {
			probs = append(probs, &Problem{Field: path, Line: lineOf(root, path), Message: err.Error(), cause: ErrInvalid})
		}
	}
	for _, k := range slices.Sorted(mapKeys(raw)) {
		if pc, ok := raw[k].(map[string]any); ok && k == "defaultConfig" {
			for _, pk := range slices.Sorted(mapKeys(pc)) {
				try(k+"."+pk, map[string]any{pk: pc[pk]}, func(b []byte) error {
					_, err := MergeProxyConfig(DefaultProxyConfig(), b)
					return err
				})
			}
			continue
		}
		try(k, map[string]any{k: raw[k]}, func(b []byte) error { return applyJSON(b, Defaults()) })
	}
	if len(probs) == 0 {
		return &Problem{Message: whole.Error(), cause: ErrInvalid}
	}
	slices.SortFunc(probs, func(a, b *Problem) int { return a.Line - b.Line })
	return joinProblems(probs)
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// joinProblems is one error for several problems (one line each).
func joinProblems(probs []*Problem) error {
	if len(probs) == 1 {
		return probs[0]
	}
	return problemList(probs)
}

// problemList is several problems; errors.Is sees ErrInvalid through each.
type problemList []*Problem

func (l problemList) Error() string {
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = p.Error()
	}
	return strings.Join(parts, "; ")
}

func (l problemList) Unwrap() []error {
	out := make([]error, len(l))
	for i, p := range l {
		out[i] = p
	}
	return out
}

// Problems lists the problems an error of Parse holds.
func Problems(err error) []*Problem {
	switch e := err.(type) {
	case *Problem:
		return []*Problem{e}
	case problemList:
		return e
	}
	return nil
}

// unknownFields lists the fields of the document that md (and the
// messages below it) do not have, as jsonpb would skip them. Values of
// well-known types (Struct, Duration, ...) are not looked into.
func unknownFields(root *yaml3.Node, md protoreflect.MessageDescriptor) []*Problem {
	var out []*Problem
	var walk func(n *yaml3.Node, md protoreflect.MessageDescriptor, path string, depth int)
	walk = func(n *yaml3.Node, md protoreflect.MessageDescriptor, path string, depth int) {
		n = deref(n)
		if n.Kind != yaml3.MappingNode || depth > 32 {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			fd := md.Fields().ByJSONName(k.Value)
			if fd == nil {
				fd = md.Fields().ByName(protoreflect.Name(k.Value))
			}
			if fd == nil {
				if len(out) < maxProblems {
					out = append(out, &Problem{Field: p, Line: k.Line, cause: ErrUnknownField,
						Message: fmt.Sprintf("unknown field of %s: ignored, as istiod ignores it", md.Name())})
				}
				continue
			}
			sub := fd.Message()
			if fd.IsMap() {
				sub = fd.MapValue().Message()
			}
			if sub == nil || sub.ParentFile().Package() == "google.protobuf" {
				continue
			}
			v = deref(v)
			switch {
			case fd.IsMap() && v.Kind == yaml3.MappingNode:
				for j := 0; j+1 < len(v.Content); j += 2 {
					walk(v.Content[j+1], sub, p+"["+v.Content[j].Value+"]", depth+1)
				}
			case fd.IsList() && v.Kind == yaml3.SequenceNode:
				for j, e := range v.Content {
					walk(e, sub, p+"["+strconv.Itoa(j)+"]", depth+1)
				}
			default:
				walk(v, sub, p, depth+1)
			}
		}
	}
	walk(root, md, "", 0)
	return out
}

func deref(n *yaml3.Node) *yaml3.Node {
	for i := 0; n.Kind == yaml3.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// lineOf finds a path ("a.b[2].c", "m[key]") in the tree: the line of the
// deepest part found (0 if none).
func lineOf(root *yaml3.Node, path string) int {
	if root == nil || path == "" {
		return 0
	}
	n, line := root, 0
	for _, part := range strings.Split(path, ".") {
		name, idx, _ := strings.Cut(part, "[")
		n = deref(n)
		next := mapValue(n, name)
		if next == nil {
			return line
		}
		line = next.Line
		n = next
		for idx != "" {
			var rest string
			idx, rest, _ = strings.Cut(idx, "]")
			n = deref(n)
			var el *yaml3.Node
			if i, err := strconv.Atoi(idx); err == nil && n.Kind == yaml3.SequenceNode && i < len(n.Content) {
				el = n.Content[i]
			} else if n.Kind == yaml3.MappingNode {
				el = mapValue(n, idx)
			}
			if el == nil {
				return line
			}
			n, line = el, el.Line
			idx = strings.TrimPrefix(rest, "[")
		}
	}
	return line
}

// mapValue is the value of key in a mapping node; its key's line is the
// one reported (a value can start on the next line).
func mapValue(n *yaml3.Node, key string) *yaml3.Node {
	if n.Kind != yaml3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := *n.Content[i+1]
			if v.Kind != yaml3.ScalarNode {
				v.Line = n.Content[i].Line
			}
			return &v
		}
	}
	return nil
}

// lineOfValue is the line of the element of list field whose value is v.
func lineOfValue(root *yaml3.Node, field, v string) int {
	l := mapValue(root, field)
	if l == nil {
		return 0
	}
	if l = deref(l); l.Kind == yaml3.SequenceNode {
		for _, e := range l.Content {
			if e.Value == v {
				return e.Line
			}
		}
	}
	return l.Line
}

// Bare decodes only the fields a document sets (no defaults, no
// validation), for telling which fields a user set; unknown fields are
// skipped.
func Bare(data []byte) (*meshv1.MeshConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	mc := &meshv1.MeshConfig{}
	if err := applyJSON(js, mc); err != nil {
		return nil, err
	}
	return mc, nil
}
