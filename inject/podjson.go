package inject

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// A pod is merged with the templates in its JSON form (maps, as
// encoding/json decodes them): converted once from the typed pod and once
// back, not around every merge. Numbers are float64 while merging (as in
// the templates' YAML, so that a list merged by a numeric key, such as
// ports by containerPort, matches across both), json.Number in the
// pod the patch is computed against (exact comparison).

// mergeMap merges a copy of overlay over cur with Kubernetes' strategic
// merge patch for a Pod (cur is updated in place and returned).
func mergeMap(cur, overlay map[string]any) (map[string]any, error) {
	return strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(cur, copyJSON(overlay).(map[string]any), podPatchMeta)
}

// podFromJSON is the typed pod of a JSON form (fromJSONValue: as
// json.Unmarshal of its text).
func podFromJSON(m map[string]any) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := fromJSONValue(&p, m); err != nil {
		return nil, err
	}
	return &p, nil
}

// floatJSON deep-copies a JSON value decoded with UseNumber, with its
// numbers as float64 (as a plain decode gives them).
func floatJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = floatJSON(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = floatJSON(e)
		}
		return l
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x
		}
		return f
	}
	return v
}

// jsonAnnotation is the pod's annotation k ("" when absent).
func jsonAnnotation(pod map[string]any, k string) string {
	md, _ := pod["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	v, _ := ann[k].(string)
	return v
}

// jsonContainer is the index of the container named name in the pod's
// spec.<list> (containers or initContainers), -1 when absent.
func jsonContainer(pod map[string]any, list, name string) int {
	spec, _ := pod["spec"].(map[string]any)
	cs, _ := spec[list].([]any)
	for i, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == name {
			return i
		}
	}
	return -1
}

// moveJSONContainer moves the container named name from the pod's
// containers to the end of its init containers.
func moveJSONContainer(pod map[string]any, name string) {
	i := jsonContainer(pod, "containers", name)
	if i < 0 {
		return
	}
	spec := pod["spec"].(map[string]any)
	cs := spec["containers"].([]any)
	c := cs[i]
	spec["containers"] = append(cs[:i:i], cs[i+1:]...)
	inits, _ := spec["initContainers"].([]any)
	spec["initContainers"] = append(inits, c)
}

// overlayCache holds templates' rendered YAML parsed, by the rendered
// text: pods alike (a Deployment's replicas) render the same text, and
// parsing YAML costs more than rendering it. Entries are immutable
// (mergeMap copies them). Bounded: overlayCacheEntries entries of at
// most overlayCacheMaxBytes of text; when full it starts over.
type overlayCache struct {
	mu sync.Mutex
	m  map[string]*overlay // guarded by mu
}

// overlay is one rendered template, parsed.
type overlay struct {
	m map[string]any
	// names and proxyInit are what m merged over nothing holds: the
	// names of what it injects (shared: not to be modified; nil when
	// that merge fails), and whether istio-proxy is among the init
	// containers.
	names     *status
	proxyInit bool
}

const (
	overlayCacheEntries  = 256
	overlayCacheMaxBytes = 64 << 10
)

// parse returns text's overlay (shared: not to be modified).
func (c *overlayCache) parse(text []byte) (*overlay, error) {
	c.mu.Lock()
	v, ok := c.m[string(text)]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(text, &m); err != nil {
		return nil, err
	}
	v = &overlay{m: m}
	if alone, err := mergeMap(map[string]any{}, m); err == nil { // else the pod's merge says why
		v.names, v.proxyInit = injectedNames(alone), jsonContainer(alone, "initContainers", proxyName) >= 0
	}
	if len(text) > overlayCacheMaxBytes {
		return v, nil
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= overlayCacheEntries {
		c.m = make(map[string]*overlay, overlayCacheEntries)
	}
	c.m[string(text)] = v
	c.mu.Unlock()
	return v, nil
}

// injectedNames lists the names of what a templates-only pod (JSON form)
// holds: containers, init containers, volumes and image pull secrets.
func injectedNames(pod map[string]any) *status {
	spec, _ := pod["spec"].(map[string]any)
	names := func(list string) []string {
		l, _ := spec[list].([]any)
		var out []string
		for _, e := range l {
			if m, ok := e.(map[string]any); ok {
				n, _ := m["name"].(string)
				out = append(out, n)
			}
		}
		return out
	}
	return &status{InitContainers: names("initContainers"), Containers: names("containers"),
		Volumes: names("volumes"), ImagePullSecrets: names("imagePullSecrets")}
}

// appendJSON encodes a decoded JSON value. Unlike json.Marshal it does
// not sort map keys (the result is only decoded again), which is most of
// json.Marshal's cost on a pod.
func appendJSON(dst []byte, v any) ([]byte, error) { return appendJSONValue(dst, v, false) }

// appendJSONSorted is appendJSON with object keys in order, as
// json.Marshal writes them.
func appendJSONSorted(dst []byte, v any) ([]byte, error) { return appendJSONValue(dst, v, true) }

func appendJSONValue(dst []byte, v any, sorted bool) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendJSONString(dst, x), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("unsupported number %v", x)
		}
		return strconv.AppendFloat(dst, x, 'f', -1, 64), nil
	case json.Number:
		return append(dst, x...), nil
	case json.RawMessage: // json.Marshal's, compact
		return append(dst, x...), nil
	case map[string]any:
		if sorted {
			return appendSortedObject(dst, x)
		}
		dst = append(dst, '{')
		first := true
		for k, e := range x {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendJSONValue(dst, e, false); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendJSONValue(dst, e, sorted); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	b, err := json.Marshal(v) // not produced by a JSON or YAML decode; kept correct anyway
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

func appendSortedObject(dst []byte, m map[string]any) ([]byte, error) {
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendJSONValue(dst, m[k], true); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendJSONString quotes s as JSON does (invalid UTF-8 as U+FFFD).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\\ufffd"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
