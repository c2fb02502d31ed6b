package ingest

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// goValue checks v against the Go type t the way strict, case-sensitive
// encoding/json (sigs.k8s.io/json, the Kubernetes decoder) reads it: struct
// fields by their json tag, inline structs flattened, no unknown fields, and
// types with their own UnmarshalJSON (Quantity, IntOrString, Time) asked
// directly.
func (s *schema) goValue(t reflect.Type, v any, p *fieldPath) {
	if v == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case intOrStringType:
		switch v.(type) {
		case string:
		case int, int64, uint64, float64:
			s.integer(v, p, math.MinInt32, math.MaxInt32, false)
		default:
			s.fail(p, "must be a number or a string, not %s", describe(v))
		}
		return
	case timeType:
		if str, ok := v.(string); !ok {
			s.fail(p, "must be an RFC 3339 timestamp string, not %s", describe(v))
		} else if _, err := time.Parse(time.RFC3339, str); err != nil {
			s.fail(p, "invalid RFC 3339 timestamp %q", str)
		}
		return
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		b, err := json.Marshal(v)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(b)
		}
		if err != nil {
			s.fail(p, "%s", cleanJSONError(err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			s.fail(p, "must be an object, not %s", describe(v))
			return
		}
		fields := jsonFields(t)
		for _, key := range sortedKeys(m) {
			ft, ok := fields[key]
			if !ok {
				s.fail(p.f(key), "unknown field%s", suggest(key, fieldNames(fields)))
				continue
			}
			s.goValue(ft, m[key], p.f(key))
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			s.fail(p, "must be an object, not %s", describe(v))
			return
		}
		for _, key := range sortedKeys(m) {
			s.goValue(t.Elem(), m[key], p.k(key))
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			str, ok := v.(string)
			if !ok {
				s.fail(p, "must be a base64 string, not %s", describe(v))
			} else if _, err := base64.StdEncoding.DecodeString(str); err != nil {
				s.fail(p, "must be base64: %v", err)
			}
			return
		}
		l, ok := v.([]any)
		if !ok {
			s.fail(p, "must be a list, not %s", describe(v))
			return
		}
		for i, e := range l {
			s.goValue(t.Elem(), e, p.i(i))
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			s.fail(p, "must be a string, not %s", describe(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			s.fail(p, "must be true or false, not %s", describe(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		s.integer(v, p, -1<<(bits-1), 1<<(bits-1)-1, false)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.integer(v, p, 0, math.MaxUint64>>(64-t.Bits()), false)
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(string); ok {
			s.fail(p, "must be a number, not %s", describe(v))
			return
		}
		s.float(v, p, t.Kind() == reflect.Float32)
	case reflect.Interface:
		// Anything goes.
	}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	timeType        = reflect.TypeFor[metav1.Time]()
)

// cleanJSONError drops the "json: " prefix and Go type names, which mean
// nothing to someone editing YAML.
func cleanJSONError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if i := strings.Index(msg, " into Go "); i > 0 {
		msg = msg[:i]
	}
	return msg
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields maps the JSON names of a struct's fields, including those of
// inline (embedded or `json:",inline"`) structs, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := make(map[string]reflect.Type)
	addJSONFields(t, fields)
	fieldCache.Store(t, fields)
	return fields
}

func addJSONFields(t reflect.Type, fields map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			if ft.Kind() == reflect.Struct {
				addJSONFields(ft, fields)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := fields[name]; !dup {
			fields[name] = f.Type
		}
	}
}

func fieldNames(fields map[string]reflect.Type) []string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
