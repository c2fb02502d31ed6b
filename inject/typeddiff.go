package inject

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// typedPatch is the JSON patch from a's JSON to b's (both of one type,
// pointers to structs), computed on the typed values as encoding/json
// would see them: field names and presence (omitempty, omitzero) as
// json.Marshal writes them, a type with its own MarshalJSON or
// MarshalText compared by its JSON. Only what differs is marshalled;
// the injected pod is never encoded whole and decoded back, which was a
// fifth of an injection. The rules are those of the JSON diff (diff):
// objects key by key, a list of another length replaced whole, one of
// the same length element by element.
// The ops' values are slices of vals (written by one encoder, where
// json.Marshal would allocate each result): valid until vals is reset.
func typedPatch(a, b any, vals *bytes.Buffer) ([]patchOp, error) {
	d := &typedDiffer{vals: vals, enc: json.NewEncoder(vals)}
	d.value("", reflect.ValueOf(a), reflect.ValueOf(b))
	return d.ops, d.err
}

type typedDiffer struct {
	ops  []patchOp
	err  error
	vals *bytes.Buffer
	enc  *json.Encoder
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType      = reflect.TypeFor[interface{ IsZero() bool }]()
)

// ownJSON: t (or *t) writes its own JSON.
func ownJSON(t reflect.Type) bool { return methodsOf(t).ownJSON }

// typeMethods are the JSON methods of a type or its pointer, looked up
// once per type (reflect's Implements was a tenth of an injection).
type typeMethods struct {
	ownJSON       bool // MarshalJSON or MarshalText
	unmarshalJSON bool
	unmarshalText bool
	isZero        bool // IsZero on the value
	ptrIsZero     bool // IsZero on the pointer only
}

var typeMethodCache sync.Map // reflect.Type -> typeMethods

func methodsOf(t reflect.Type) typeMethods {
	if m, ok := typeMethodCache.Load(t); ok {
		return m.(typeMethods)
	}
	pt := reflect.PointerTo(t)
	m := typeMethods{
		ownJSON: t.Implements(jsonMarshalerType) || pt.Implements(jsonMarshalerType) ||
			t.Implements(textMarshalerType) || pt.Implements(textMarshalerType),
		unmarshalJSON: pt.Implements(jsonUnmarshalerType),
		unmarshalText: pt.Implements(textUnmarshalerType),
		isZero:        t.Implements(isZeroerType),
		ptrIsZero:     !t.Implements(isZeroerType) && pt.Implements(isZeroerType),
	}
	typeMethodCache.Store(t, m)
	return m
}

// marshal encodes v as json.Marshal encodes it inside its parent
// (addressable values use pointer-receiver methods, as there).
func (d *typedDiffer) marshal(v reflect.Value) json.RawMessage {
	var x any
	switch {
	case !v.IsValid():
		return json.RawMessage("null")
	case v.CanAddr():
		x = v.Addr().Interface()
	default:
		x = v.Interface()
	}
	start := d.vals.Len()
	if err := d.enc.Encode(x); err != nil {
		if d.err == nil {
			d.err = err
		}
		return json.RawMessage("null")
	}
	// Encode ends the value with a newline. Later writes may move the
	// buffer; this slice keeps the bytes it was given.
	return d.vals.Bytes()[start : d.vals.Len()-1 : d.vals.Len()-1]
}

func (d *typedDiffer) replace(path string, b reflect.Value) {
	d.ops = append(d.ops, patchOp{Op: "replace", Path: path, Value: d.marshal(b)})
}

// value diffs two present values of one type at path.
func (d *typedDiffer) value(path string, a, b reflect.Value) {
	t := a.Type()
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && ownJSON(t) {
		if ja, jb := d.marshal(a), d.marshal(b); !bytes.Equal(ja, jb) {
			d.ops = append(d.ops, patchOp{Op: "replace", Path: path, Value: jb})
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() || b.IsNil():
			d.replace(path, b)
		case t.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type():
			d.replace(path, b)
		default:
			d.value(path, a.Elem(), b.Elem())
		}
	case reflect.Struct:
		for _, f := range jsonFields(t) {
			av, bv := a.FieldByIndex(f.index), b.FieldByIndex(f.index)
			ap, bp := f.present(av), f.present(bv)
			p := path + "/" + f.pointer
			switch {
			case !ap && !bp:
			case !bp:
				d.ops = append(d.ops, patchOp{Op: "remove", Path: p})
			case !ap:
				d.ops = append(d.ops, patchOp{Op: "add", Path: p, Value: d.marshal(bv)})
			default:
				d.value(p, av, bv)
			}
		}
	case reflect.Map:
		d.mapValue(path, a, b)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !ownJSON(t.Elem()) { // base64
			if a.IsNil() != b.IsNil() || !bytes.Equal(a.Bytes(), b.Bytes()) {
				d.replace(path, b)
			}
			return
		}
		if a.IsNil() != b.IsNil() {
			d.replace(path, b)
			return
		}
		fallthrough
	case reflect.Array:
		if a.Len() != b.Len() {
			d.replace(path, b)
			return
		}
		for i := range a.Len() {
			d.value(path+"/"+strconv.Itoa(i), a.Index(i), b.Index(i))
		}
	case reflect.String:
		if a.String() != b.String() {
			d.replace(path, b)
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			d.replace(path, b)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			d.replace(path, b)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if a.Uint() != b.Uint() {
			d.replace(path, b)
		}
	case reflect.Float32, reflect.Float64:
		if a.Float() != b.Float() {
			d.replace(path, b)
		}
	default: // what JSON cannot encode: compare the errors' absence
		if ja, jb := d.marshal(a), d.marshal(b); !bytes.Equal(ja, jb) {
			d.replace(path, b)
		}
	}
}

// mapValue diffs two maps key by key, keys in order (string keys; maps
// keyed otherwise are compared whole).
func (d *typedDiffer) mapValue(path string, a, b reflect.Value) {
	if a.IsNil() != b.IsNil() {
		d.replace(path, b)
		return
	}
	t := a.Type()
	if t.Key().Kind() != reflect.String || ownJSON(t.Key()) {
		if ja, jb := d.marshal(a), d.marshal(b); !bytes.Equal(ja, jb) {
			d.replace(path, b)
		}
		return
	}
	keys := make([]reflect.Value, 0, a.Len()+b.Len())
	for _, k := range a.MapKeys() {
		keys = append(keys, k)
	}
	for _, k := range b.MapKeys() {
		if !a.MapIndex(k).IsValid() {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
	for _, k := range keys {
		p := path + "/" + escapePointer(k.String())
		av, bv := a.MapIndex(k), b.MapIndex(k)
		switch {
		case !bv.IsValid():
			d.ops = append(d.ops, patchOp{Op: "remove", Path: p})
		case !av.IsValid():
			d.ops = append(d.ops, patchOp{Op: "add", Path: p, Value: d.marshal(bv)})
		default:
			d.value(p, av, bv)
		}
	}
}

// jsonField is a struct field as encoding/json writes it.
type jsonField struct {
	name      string
	pointer   string // name, escaped for a JSON pointer
	index     []int
	omitEmpty bool
	omitZero  bool
}

func (f *jsonField) present(v reflect.Value) bool {
	if f.omitEmpty && isEmptyJSON(v) {
		return false
	}
	if f.omitZero && isZeroJSON(v) {
		return false
	}
	return true
}

// isEmptyJSON is encoding/json's omitempty test.
func isEmptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// isZeroJSON is encoding/json's omitzero test: the type's IsZero method
// when it has one, else the zero value.
func isZeroJSON(v reflect.Value) bool {
	t := v.Type()
	switch {
	case (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) && v.IsNil():
		return true
	case methodsOf(t).isZero:
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	case methodsOf(t).ptrIsZero:
		if !v.CanAddr() {
			c := reflect.New(t).Elem()
			c.Set(v)
			v = c
		}
		return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
	}
	return v.IsZero()
}

var jsonFieldCache sync.Map // reflect.Type -> []jsonField

// jsonFields lists t's fields as encoding/json names them: tag name or
// Go name, "-" skipped, unexported skipped, an embedded struct without a
// tag name inlined.
func jsonFields(t reflect.Type) []jsonField {
	if v, ok := jsonFieldCache.Load(t); ok {
		return v.([]jsonField)
	}
	var out []jsonField
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
				walk(sf.Type, idx)
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			f := jsonField{name: name, pointer: escapePointer(name), index: idx}
			for _, o := range strings.Split(opts, ",") {
				switch o {
				case "omitempty":
					f.omitEmpty = true
				case "omitzero":
					f.omitZero = true
				}
			}
			out = append(out, f)
		}
	}
	walk(t, nil)
	jsonFieldCache.Store(t, out)
	return out
}
