package inject

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// fromJSONValue stores a decoded JSON value (what encoding/json or a
// YAML decode gives: map[string]any, []any, string, float64,
// json.Number, bool, nil) into dst, a pointer, as json.Unmarshal of its
// text would: the merged pod becomes typed without being encoded to text
// and parsed again (a fifth of an injection), and its strings are shared,
// not copied. Field names match exactly, else case-insensitively; unknown
// keys are ignored; types with their own UnmarshalJSON get their value's
// JSON (numbers as appendJSON writes them, as json.Unmarshal saw them).
// A value of the wrong type is an error (json.Unmarshal would fill the
// rest before failing; the caller only needs the failure).
// FuzzFromJSONValue compares it with json.Unmarshal.
func fromJSONValue(dst any, x any) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("decoding into %T: not a pointer", dst)
	}
	var d mapDecoder
	return d.set(v.Elem(), x)
}

type mapDecoder struct{ buf []byte }

var (
	stringMapType       = reflect.TypeFor[map[string]string]()
	stringsType         = reflect.TypeFor[[]string]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// typeError is json.Unmarshal's complaint about a value of the wrong type.
func typeError(what string, t reflect.Type) error {
	return fmt.Errorf("cannot unmarshal %s into Go value of type %s", what, t)
}

// fieldError is a decoding error at a path of keys and indexes.
type fieldError struct {
	path []string // outermost first
	err  error
}

func (e *fieldError) Error() string { return strings.Join(e.path, ".") + ": " + e.err.Error() }

func (e *fieldError) Unwrap() error { return e.err }

// at puts err below key (built only for errors, as they unwind).
func at(key string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		fe.path = append([]string{key}, fe.path...)
		return fe
	}
	return &fieldError{path: []string{key}, err: err}
}

func jsonKind(x any) string {
	switch x.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", x)
}

// set stores x into v (settable).
func (d *mapDecoder) set(v reflect.Value, x any) error {
	t := v.Type()
	// Own decoders first, as json.Unmarshal's indirect finds them: on the
	// value's address, or on what a pointer points to.
	if t.Kind() != reflect.Pointer && v.CanAddr() {
		tm := methodsOf(t)
		if tm.unmarshalJSON {
			b, err := appendJSON(d.buf[:0], x)
			if err != nil {
				return err
			}
			d.buf = b[:0]
			return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b)
		}
		if tm.unmarshalText {
			switch s := x.(type) {
			case string:
				return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
			case nil:
				return nil
			}
			return typeError(jsonKind(x), t)
		}
	}
	if x == nil {
		switch t.Kind() {
		case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
			v.SetZero()
		}
		return nil // null leaves anything else as it is
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return d.set(v.Elem(), x)
	case reflect.Interface:
		if t.NumMethod() > 0 {
			return typeError(jsonKind(x), t)
		}
		v.Set(reflect.ValueOf(plainJSON(x)))
		return nil
	case reflect.Struct:
		m, ok := x.(map[string]any)
		if !ok {
			return typeError(jsonKind(x), t)
		}
		fields := jsonFields(t)
		for k, e := range m {
			f := fieldNamed(fields, k)
			if f == nil {
				continue
			}
			if err := d.set(v.FieldByIndex(f.index), e); err != nil {
				return at(f.name, err)
			}
		}
		return nil
	case reflect.Map:
		m, ok := x.(map[string]any)
		if !ok {
			return typeError(jsonKind(x), t)
		}
		kt := t.Key()
		if kt.Kind() != reflect.String || methodsOf(kt).unmarshalText {
			return d.viaText(v, x) // keys json.Unmarshal parses
		}
		if t == stringMapType && v.IsNil() { // labels, annotations: without reflection per entry
			sm := make(map[string]string, len(m))
			for k, e := range m {
				switch y := e.(type) {
				case string:
					sm[k] = y
				case nil:
					sm[k] = ""
				default:
					return at(k, typeError(jsonKind(e), t.Elem()))
				}
			}
			v.Set(reflect.ValueOf(sm))
			return nil
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(t, len(m)))
		}
		for k, e := range m {
			ev := reflect.New(t.Elem()).Elem()
			if err := d.set(ev, e); err != nil {
				return at(k, err)
			}
			v.SetMapIndex(reflect.ValueOf(k).Convert(kt), ev)
		}
		return nil
	case reflect.Slice:
		if s, ok := x.(string); ok && t.Elem().Kind() == reflect.Uint8 {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return err
			}
			v.SetBytes(b)
			return nil
		}
		l, ok := x.([]any)
		if !ok {
			return typeError(jsonKind(x), t)
		}
		if t == stringsType { // args, commands
			ss := make([]string, len(l))
			for i, e := range l {
				switch y := e.(type) {
				case string:
					ss[i] = y
				case nil:
				default:
					return at(strconv.Itoa(i), typeError(jsonKind(e), t.Elem()))
				}
			}
			v.Set(reflect.ValueOf(ss))
			return nil
		}
		s := reflect.MakeSlice(t, len(l), len(l))
		for i, e := range l {
			if err := d.set(s.Index(i), e); err != nil {
				return at(strconv.Itoa(i), err)
			}
		}
		v.Set(s)
		return nil
	case reflect.Array:
		l, ok := x.([]any)
		if !ok {
			return typeError(jsonKind(x), t)
		}
		for i := range v.Len() {
			if i >= len(l) {
				v.Index(i).SetZero()
				continue
			}
			if err := d.set(v.Index(i), l[i]); err != nil {
				return at(strconv.Itoa(i), err)
			}
		}
		return nil
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			return typeError(jsonKind(x), t)
		}
		v.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			return typeError(jsonKind(x), t)
		}
		v.SetBool(b)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return d.number(v, x)
	}
	return typeError(jsonKind(x), t)
}

// number stores a number as json.Unmarshal parses its text (the text
// appendJSON writes for a float64).
func (d *mapDecoder) number(v reflect.Value, x any) error {
	var text string
	switch n := x.(type) {
	case float64:
		if math.IsInf(n, 0) || math.IsNaN(n) {
			return fmt.Errorf("unsupported number %v", n)
		}
		text = strconv.FormatFloat(n, 'f', -1, 64)
	case json.Number:
		text = string(n)
	default:
		return typeError(jsonKind(x), v.Type())
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return typeError("number "+text, v.Type())
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil || v.OverflowUint(n) {
			return typeError("number "+text, v.Type())
		}
		v.SetUint(n)
	default:
		n, err := strconv.ParseFloat(text, v.Type().Bits())
		if err != nil || v.OverflowFloat(n) {
			return typeError("number "+text, v.Type())
		}
		v.SetFloat(n)
	}
	return nil
}

// viaText decodes what this decoder does not (maps keyed by numbers or
// by a type that parses its keys) through JSON text, as json.Unmarshal.
func (d *mapDecoder) viaText(v reflect.Value, x any) error {
	b, err := appendJSON(nil, x)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v.Addr().Interface())
}

// plainJSON is x as json.Unmarshal gives it to an empty interface:
// numbers as float64 (json.Number only comes from this package's own
// decodes, which use it for exactness).
func plainJSON(x any) any {
	switch y := x.(type) {
	case json.Number:
		f, err := y.Float64()
		if err != nil {
			return y
		}
		return f
	case map[string]any, []any:
		return floatJSON(y)
	}
	return x
}

// fieldNamed is the field json.Unmarshal stores a key in: the exact name,
// else the first whose name equals it case-insensitively.
func fieldNamed(fields []jsonField, k string) *jsonField {
	for i := range fields {
		if fields[i].name == k {
			return &fields[i]
		}
	}
	for i := range fields {
		if strings.EqualFold(fields[i].name, k) {
			return &fields[i]
		}
	}
	return nil
}
