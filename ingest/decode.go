package ingest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	yaml "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// Decode reads the objects of one file: multi-document YAML (documents
// separated by "---" lines) or JSON, each document an object or a List of
// objects. It skips empty documents and kinds pilotfish does not read
// (kinds_unknown.go: a kind a mesh API group lacks is an error, mesh
// config pilotfish does not implement a warning that Decode drops and
// DecodeWithWarnings returns). A document without apiVersion or kind, a
// known kind under an unknown API version, a YAML syntax error, an unknown
// field, a value of the wrong type or an object over Kubernetes' size limit
// is an error (*Error, located at the field's line where possible); the
// other documents of the file still decode. Objects come back in file
// order; semantic checks are Validate's.
func Decode(file string, data []byte) (objs []Object, errs []error) {
	d := decoder{file: file}
	for _, c := range splitDocuments(data) {
		d.chunk(c)
	}
	sortErrors(d.errs)
	return d.objs, d.errs
}

// DecodeWithWarnings is Decode, and also returns the warnings (each an
// *Error wrapping ErrIgnored) for documents that are ignored although their
// author likely meant them to take effect, and for each field an object
// sets that pilotfish does not support (Unsupported, the field ledger), at
// the field's line.
func DecodeWithWarnings(file string, data []byte) (objs []Object, errs, warnings []error) {
	d := decoder{file: file, ledger: true}
	for _, c := range splitDocuments(data) {
		d.chunk(c)
	}
	sortErrors(d.errs)
	sortErrors(d.warns)
	return d.objs, d.errs, d.warns
}

type decoder struct {
	file  string
	objs  []Object
	errs  []error
	warns []error
	// ledger: report the unsupported fields of each object (Unsupported).
	ledger bool
}

type chunk struct {
	text []byte
	line int // file line of text's first line
}

// splitDocuments cuts data at document separators ("---" lines) itself
// rather than leaving it to the YAML decoder, so that a syntax error in one
// document does not hide the documents after it. Directives ("%YAML") stay
// with the document they introduce.
func splitDocuments(data []byte) []chunk {
	var chunks []chunk
	start, startLine, line := 0, 1, 1
	for i := 0; i < len(data); line++ {
		end, next := lineEnd(data, i)
		l := data[i:end]
		if i > start && bytes.HasPrefix(l, []byte("---")) &&
			(len(l) == 3 || l[3] == ' ' || l[3] == '\t') &&
			!onlyDirectives(data[start:i]) {
			chunks = append(chunks, chunk{data[start:i], startLine})
			start, startLine = i, line
		}
		i = next
	}
	if start < len(data) {
		chunks = append(chunks, chunk{data[start:], startLine})
	}
	return chunks
}

// lineEnd returns the end of the line starting at i and the start of the
// next one. Line breaks are YAML's (and so yaml.v3's, whose line numbers
// must agree with ours): LF, CRLF, a lone CR, NEL, LS and PS.
func lineEnd(data []byte, i int) (end, next int) {
	for j := i; j < len(data); j++ {
		switch c := data[j]; {
		case c == '\n':
			return j, j + 1
		case c == '\r':
			if j+1 < len(data) && data[j+1] == '\n' {
				return j, j + 2
			}
			return j, j + 1
		case c == 0xC2 && j+1 < len(data) && data[j+1] == 0x85:
			return j, j + 2
		case c == 0xE2 && j+2 < len(data) && data[j+1] == 0x80 && (data[j+2] == 0xA8 || data[j+2] == 0xA9):
			return j, j + 3
		}
	}
	return len(data), len(data)
}

func onlyDirectives(b []byte) bool {
	found := false
	for l := range bytes.Lines(b) {
		l = bytes.TrimSpace(l)
		switch {
		case len(l) == 0 || l[0] == '#':
		case l[0] == '%':
			found = true
		default:
			return false
		}
	}
	return found
}

func (d *decoder) chunk(c chunk) {
	if bytes.Contains(c.text, []byte(`\/`)) && isJSON(c.text) {
		c.text = unescapeSlashes(c.text)
	}
	dec := yaml.NewDecoder(bytes.NewReader(c.text))
	var src *source
	for n := 0; ; n++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == io.EOF {
			return
		}
		if err != nil {
			line, msg := yamlErrorLine(err.Error(), c.line-1)
			if line == 0 {
				line = c.line
			}
			d.errs = append(d.errs, &Error{Pos: Position{d.file, line}, Message: msg, cause: ErrSyntax})
			return
		}
		if len(doc.Content) == 0 || isNull(doc.Content[0]) {
			continue
		}
		if src == nil {
			src = &source{text: string(c.text), line: c.line, item: -1}
		}
		s := *src
		s.doc = n
		d.document(doc.Content[0], &s, c.line-1)
	}
}

// isJSON reports whether a chunk looks like a JSON document.
func isJSON(b []byte) bool {
	for l := range bytes.Lines(b) {
		if l = bytes.TrimSpace(l); bytes.HasPrefix(l, []byte("---")) {
			l = bytes.TrimSpace(l[3:])
		}
		if len(l) > 0 && l[0] != '#' {
			return l[0] == '{' || l[0] == '['
		}
	}
	return false
}

// unescapeSlashes rewrites JSON's "\/" escape, which YAML lacks, as "/".
// Only escapes inside strings change, and no line moves.
func unescapeSlashes(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '\\' && i+1 < len(b):
			if b[i+1] != '/' {
				out = append(out, c)
			}
			c = b[i+1]
			i++
		case c == '"':
			inString = false
		}
		out = append(out, c)
	}
	return out
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// yamlLineRE matches the location yaml.v3 puts in its messages, and
// yamlAtLineRE a line it mentions in the message itself.
var (
	yamlLineRE   = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)
	yamlAtLineRE = regexp.MustCompile(`at line (\d+)`)
)

// parserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner), whose line numbers it reports 0-based.
var parserProblems = []string{
	"did not find expected <document start>", "did not find expected <stream-start>",
	"did not find expected '-' indicator", "did not find expected key",
	"did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"found undefined tag handle", "found duplicate %YAML directive",
	"found incompatible YAML document", "found duplicate %TAG directive",
}

// yamlErrorLine splits "yaml: line 3: did not find expected key" into the
// file line (0 if none) and "yaml: did not find expected key". Lines in
// yaml.v3's messages count from the start of the document's chunk; offset
// is the file line before it.
func yamlErrorLine(msg string, offset int) (int, string) {
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
		if slices.Contains(parserProblems, msg) {
			line++
		}
		line += offset
	}
	msg = yamlAtLineRE.ReplaceAllStringFunc(msg, func(s string) string {
		n, _ := strconv.Atoi(s[len("at line "):])
		return "at line " + strconv.Itoa(n+offset)
	})
	return line, "yaml: " + msg
}

// document decodes one top-level node: an object or a List of them.
func (d *decoder) document(root *yaml.Node, src *source, offset int) {
	line := root.Line + offset
	if root.Kind != yaml.MappingNode {
		d.errs = append(d.errs, &Error{
			Pos:     Position{d.file, line},
			Message: fmt.Sprintf("document is %s, not an object with apiVersion and kind", nodeKind(root)),
			cause:   ErrTypeMeta,
		})
		return
	}
	apiVersion, kind := scalar(root, "apiVersion"), scalar(root, "kind")
	_, items := mapLookup(root, "items", false)
	if apiVersion != "" && strings.HasSuffix(kind, "List") && items != nil {
		d.list(root, items, apiVersion, strings.TrimSuffix(kind, "List"), src, offset)
		return
	}
	d.object(root, apiVersion, kind, src, offset)
}

// list decodes the items of a List (kind "List", or "ServiceList" and the
// like, whose items may leave out apiVersion and kind).
func (d *decoder) list(root, items *yaml.Node, apiVersion, itemKind string, src *source, offset int) {
	items = deref(items)
	if items.Kind != yaml.SequenceNode {
		if !isNull(items) {
			d.errs = append(d.errs, &Error{Pos: Position{d.file, items.Line + offset}, Kind: scalar(root, "kind"),
				Field: "items", Message: "must be a list", cause: ErrSchema})
		}
		return
	}
	for i, item := range items.Content {
		item = deref(item)
		s := *src
		s.item = i
		if item.Kind != yaml.MappingNode {
			d.errs = append(d.errs, &Error{Pos: Position{d.file, item.Line + offset}, Kind: scalar(root, "kind"),
				Field: "items[" + strconv.Itoa(i) + "]", Message: "must be an object, not " + nodeKind(item), cause: ErrSchema})
			continue
		}
		av, k := scalar(item, "apiVersion"), scalar(item, "kind")
		if av == "" && k == "" && itemKind != "" {
			av, k = apiVersion, itemKind
		}
		if strings.HasSuffix(k, "List") {
			if _, nested := mapLookup(item, "items", false); nested != nil {
				d.errs = append(d.errs, &Error{Pos: Position{d.file, item.Line + offset}, Kind: k,
					Message: "a List may not hold another List", cause: ErrTypeMeta})
				continue
			}
		}
		d.object(item, av, k, &s, offset)
	}
}

// object decodes one object node; the schema checks report every problem,
// then the typed decoders build the Object.
func (d *decoder) object(root *yaml.Node, apiVersion, kind string, src *source, offset int) {
	name, namespace := metaScalars(root)
	r := &reporter{file: d.file, kind: kind, namespace: namespace, name: name,
		docLine: root.Line + offset, offset: offset, root: root}
	defer func() { d.errs = append(d.errs, r.errs...) }()
	var p *fieldPath
	switch {
	case apiVersion == "" && kind == "":
		r.kind = ""
		r.add(ErrTypeMeta, nil, "missing apiVersion and kind")
		return
	case apiVersion == "":
		r.add(ErrTypeMeta, p.f("apiVersion"), "required")
		return
	case kind == "":
		r.add(ErrTypeMeta, p.f("kind"), "required")
		return
	}
	k, known, versionOK := lookupKind(apiVersion, kind)
	if !known {
		d.notRead(r, apiVersion, kind)
		return
	}
	info := &kinds[k]
	if info.namespaced && r.namespace == "" {
		r.namespace = "default"
	} else if !info.namespaced {
		r.namespace = ""
	}
	if !versionOK {
		r.add(ErrVersion, p.f("apiVersion"), fmt.Sprintf("%s is not a supported version of %s; use %s",
			strconv.Quote(apiVersion), kind, info.apiVersions()))
		return
	}

	var raw any
	if err := root.Decode(&raw); err != nil {
		r.yamlError(err)
		return
	}
	s := schema{r}
	m, _ := s.normalize(raw, nil).(map[string]any)
	if len(r.errs) > 0 || m == nil {
		return
	}
	if info.istio() {
		s.istioObject(info, m)
	} else {
		s.goValue(reflect.TypeOf(info.newObject()), m, nil)
	}
	if len(r.errs) > 0 {
		return
	}

	obj := Object{Kind: k, APIVersion: apiVersion, Pos: Position{d.file, r.docLine}, src: src}
	var err error
	if info.istio() {
		err = decodeIstio(info, m, &obj)
	} else {
		err = decodeKube(info, m, &obj)
	}
	if err != nil {
		// The schema checks should have caught it: report it without a path.
		r.add(ErrSchema, nil, err.Error())
		return
	}
	var size int
	if obj.Hash, size, err = hashObject(info, m, &obj.Meta); err != nil {
		r.add(ErrSchema, nil, err.Error())
		return
	}
	if size > maxObjectSize {
		r.add(ErrInvalid, nil, objectSizeMessage(size))
		return
	}
	d.objs = append(d.objs, obj)
	if d.ledger && info.istio() {
		// The tree is at hand: lines cost no second parse.
		lr := reporter{file: r.file, kind: r.kind, namespace: r.namespace, name: r.name,
			docLine: r.docLine, offset: r.offset, root: root}
		d.warns = append(d.warns, unsupportedFields(&lr, &obj)...)
	}
}

// yamlError reports the errors yaml.v3 finds while building the generic
// value (duplicate keys, excessive aliasing), each at its own line.
func (r *reporter) yamlError(err error) {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	for _, msg := range msgs {
		line, text := yamlErrorLine(msg, r.offset)
		e := &Error{Pos: Position{r.file, r.docLine}, Kind: r.kind, Namespace: r.namespace, Name: r.name,
			Message: text, cause: ErrSyntax}
		if line > 0 {
			e.Pos.Line = line
		}
		r.errs = append(r.errs, e)
	}
}

// istioObject checks the top level of an Istio object: metadata as
// Kubernetes ObjectMeta, spec as the kind's proto message, status ignored
// (istiod writes it; pilotfish does not read it).
func (s *schema) istioObject(info *kindInfo, m map[string]any) {
	var p *fieldPath
	for _, key := range sortedKeys(m) {
		switch key {
		case "apiVersion", "kind":
		case "metadata":
			s.goValue(objectMetaType, m[key], p.f(key))
		case "spec":
			m[key] = s.protoMessage(info.newObject().(proto.Message).ProtoReflect().Descriptor(), m[key], p.f(key))
		case "status":
		default:
			s.fail(p.f(key), "unknown field%s", suggest(key, []string{"apiVersion", "kind", "metadata", "spec", "status"}))
		}
	}
}

var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

func decodeIstio(info *kindInfo, m map[string]any, obj *Object) error {
	if md, ok := m["metadata"]; ok && md != nil {
		if err := strictJSON(md, &obj.Meta); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
	}
	defaultNamespace(info, &obj.Meta)
	spec := info.newObject().(proto.Message)
	if v, ok := m["spec"]; ok && v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("spec: %s", cleanJSONError(err))
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, spec); err != nil {
			return fmt.Errorf("spec: %v", err)
		}
	}
	obj.Spec = spec
	return nil
}

func decodeKube(info *kindInfo, m map[string]any, obj *Object) error {
	typed := info.newObject()
	if err := strictJSON(m, typed); err != nil {
		return err
	}
	meta := objectMeta(typed)
	defaultNamespace(info, meta)
	obj.Meta = *meta
	obj.Spec = typed
	return nil
}

// strictJSON decodes v into out as the Kubernetes API server would:
// case-sensitive, no unknown or duplicate fields.
func strictJSON(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errors.New(cleanJSONError(err))
	}
	strict, err := kjson.UnmarshalStrict(b, out, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err == nil && len(strict) > 0 {
		err = strict[0]
	}
	if err != nil {
		return errors.New(cleanJSONError(err))
	}
	return nil
}

func objectMeta(obj any) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.Service:
		return &o.ObjectMeta
	case *corev1.Pod:
		return &o.ObjectMeta
	case *corev1.Namespace:
		return &o.ObjectMeta
	case *discoveryv1.EndpointSlice:
		return &o.ObjectMeta
	case *corev1.Secret:
		return &o.ObjectMeta
	}
	panic(fmt.Sprintf("ingest: no ObjectMeta in %T", obj))
}

func defaultNamespace(info *kindInfo, meta *metav1.ObjectMeta) {
	if !info.namespaced {
		meta.Namespace = ""
	} else if meta.Namespace == "" {
		meta.Namespace = "default"
	}
}

// hashObject hashes the canonical JSON of what the object means: its name,
// namespace, labels, annotations and body (spec, or the fields of a
// Kubernetes object), with map keys sorted by encoding/json.
// It also returns the JSON's length, which maxObjectSize bounds.
func hashObject(info *kindInfo, m map[string]any, meta *metav1.ObjectMeta) (uint64, int, error) {
	canon := make(map[string]any, len(m))
	for k, v := range m {
		switch {
		case k == "apiVersion" || k == "metadata":
		case k == "status" && info.istio():
		default:
			canon[k] = v
		}
	}
	canon["metadata"] = map[string]any{
		"name": meta.Name, "namespace": meta.Namespace,
		"labels": meta.Labels, "annotations": meta.Annotations,
		"generation": meta.Generation, // a config row carries it
	}
	b, err := json.Marshal(canon)
	if err != nil {
		return 0, 0, errors.New(cleanJSONError(err))
	}
	return xxhash.Sum64(b), len(b), nil
}

// normalize turns yaml.v3's generic value into JSON's: map keys become
// strings (YAML allows `8080:` as a key; JSON and Kubernetes' YAML reader
// spell it "8080"), timestamps and binary become strings.
func (s *schema) normalize(v any, p *fieldPath) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = s.normalize(e, p.k(k))
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := mapKey(k)
			if !ok {
				s.fail(p, "map keys must be strings or numbers, not %s", describe(k))
				continue
			}
			out[ks] = s.normalize(e, p.k(ks))
		}
		return out
	case []any:
		for i, e := range v {
			v[i] = s.normalize(e, p.i(i))
		}
		return v
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case nil, string, bool, int, int64, uint64, float64:
		// Non-finite floats stay: the schema checks reject them where a
		// number is expected, and encoding them fails elsewhere.
		return v
	default:
		s.fail(p, "unsupported YAML value of type %T", v)
		return nil
	}
}

func mapKey(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case int:
		return strconv.Itoa(k), true
	case int64:
		return strconv.FormatInt(k, 10), true
	case uint64:
		return strconv.FormatUint(k, 10), true
	case float64:
		return strconv.FormatFloat(k, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(k), true
	}
	return "", false
}

// scalar returns the value of a scalar key of a mapping node, or "".
func scalar(m *yaml.Node, key string) string {
	_, v := mapLookup(m, key, false)
	if v == nil {
		return ""
	}
	if v = deref(v); v.Kind != yaml.ScalarNode || isNull(v) {
		return ""
	}
	return v.Value
}

// metaScalars reads metadata.name and metadata.namespace from the tree, so
// that even an object that fails to decode is named in its errors.
func metaScalars(root *yaml.Node) (name, namespace string) {
	_, md := mapLookup(root, "metadata", false)
	if md == nil {
		return "", ""
	}
	if md = deref(md); md.Kind != yaml.MappingNode {
		return "", ""
	}
	return scalar(md, "name"), scalar(md, "namespace")
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "an object"
	case yaml.ScalarNode:
		return "a scalar (" + strconv.Quote(truncate(n.Value, 40)) + ")"
	}
	return "empty"
}
