package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// fieldPath is an immutable path to a field ("spec.http[0].route[1].weight"),
// built as a check descends; a child shares its parent, so a path costs one
// small allocation per step and is rendered only when an error needs it.
type fieldPath struct {
	parent *fieldPath
	name   string // field name or map key
	index  int
	kind   uint8
}

const (
	stepField uint8 = iota // .name
	stepIndex              // [index]
	stepKey                // [name], a map key
)

// f returns the path of field name under p (p may be nil, the root).
func (p *fieldPath) f(name string) *fieldPath {
	return &fieldPath{parent: p, name: name, kind: stepField}
}

// i returns the path of element i of the list at p.
func (p *fieldPath) i(i int) *fieldPath { return &fieldPath{parent: p, index: i, kind: stepIndex} }

// k returns the path of key in the map at p.
func (p *fieldPath) k(key string) *fieldPath { return &fieldPath{parent: p, name: key, kind: stepKey} }

func (p *fieldPath) steps() []*fieldPath {
	var s []*fieldPath
	for q := p; q != nil; q = q.parent {
		s = append(s, q)
	}
	for l, r := 0, len(s)-1; l < r; l, r = l+1, r-1 {
		s[l], s[r] = s[r], s[l]
	}
	return s
}

func (p *fieldPath) String() string {
	var b strings.Builder
	for n, s := range p.steps() {
		switch s.kind {
		case stepField:
			if n > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		case stepIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case stepKey:
			b.WriteByte('[')
			if s.name == "" || strings.ContainsAny(s.name, "[]") {
				b.WriteString(strconv.Quote(s.name))
			} else {
				b.WriteString(s.name)
			}
			b.WriteByte(']')
		}
	}
	return b.String()
}

// lineOf walks root (the document's top mapping) along p and returns the
// line of the deepest node it reaches: the field itself when it is present,
// else its closest present ancestor (a missing required field reports the
// line of the object holding it).
func lineOf(root *yaml.Node, p *fieldPath) int {
	if root == nil {
		return 0
	}
	n, line := root, root.Line
	for _, s := range p.steps() {
		n = deref(n)
		var next *yaml.Node
		switch s.kind {
		case stepIndex:
			if n.Kind == yaml.SequenceNode && s.index < len(n.Content) {
				next = n.Content[s.index]
				line = next.Line
			}
		default:
			if n.Kind == yaml.MappingNode {
				if k, v := mapLookup(n, s.name, s.kind == stepField); v != nil {
					next, line = v, k.Line
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// mapLookup finds key in a mapping node. Proto fields may be written in
// their JSON (camelCase) or proto (snake_case) spelling; paths use the JSON
// one, so a field name also matches its other spelling.
func mapLookup(m *yaml.Node, key string, field bool) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	if field {
		want := foldName(key)
		for i := 0; i+1 < len(m.Content); i += 2 {
			if foldName(m.Content[i].Value) == want {
				return m.Content[i], m.Content[i+1]
			}
		}
	}
	return nil, nil
}

func foldName(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

// reporter collects the errors of one object, with their lines. Decode has
// the document's tree at hand; Validate parses the object's source text only
// when the first error needs a line.
type reporter struct {
	file                  string
	kind, namespace, name string
	docLine               int
	offset                int        // file line of the tree's line 1, minus 1
	root                  *yaml.Node // top mapping of the object; nil until needed
	src                   *source    // where root comes from when nil
	errs                  []error
}

func (r *reporter) add(cause error, p *fieldPath, msg string) {
	line := r.docLine
	if p != nil {
		if r.root == nil && r.src != nil {
			r.root, r.offset = r.src.parse()
			r.src = nil
		}
		if l := lineOf(r.root, p); l > 0 {
			line = l + r.offset
		}
	}
	e := &Error{
		Pos:       Position{File: r.file, Line: line},
		Kind:      r.kind,
		Namespace: r.namespace,
		Name:      r.name,
		Message:   msg,
		cause:     cause,
	}
	if p != nil {
		e.Field = p.String()
	}
	r.errs = append(r.errs, e)
}

func (r *reporter) errorf(p *fieldPath, format string, args ...any) {
	r.add(ErrInvalid, p, fmt.Sprintf(format, args...))
}

// parse returns the top mapping node of the source's object, and the line
// offset of its tree; nil if the text no longer parses (it always does, as
// Decode parsed it before).
func (s *source) parse() (*yaml.Node, int) {
	dec := yaml.NewDecoder(bytes.NewReader([]byte(s.text)))
	var doc yaml.Node
	for i := 0; i <= s.doc; i++ {
		doc = yaml.Node{}
		if err := dec.Decode(&doc); err != nil {
			return nil, 0
		}
	}
	if len(doc.Content) == 0 {
		return nil, 0
	}
	root := doc.Content[0]
	if s.item >= 0 {
		_, items := mapLookup(root, "items", false)
		if items == nil || items.Kind != yaml.SequenceNode || s.item >= len(items.Content) {
			return nil, 0
		}
		root = items.Content[s.item]
	}
	return root, s.line - 1
}

// sortErrors orders errors by file and line, keeping the order of errors on
// one line (the order checks found them in).
func sortErrors(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errPos(errs[i]), errPos(errs[j])
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
}

func errPos(err error) Position {
	var e *Error
	if errors.As(err, &e) {
		return e.Pos
	}
	return Position{}
}
