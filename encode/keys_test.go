package encode_test

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// keyTypes lists every generator key type of package encode. Adding a key
// type is one line here; TestKeysHashEveryField and TestKeysHashAllocs then
// cover it.
var keyTypes = []encode.Key{
	&encode.ClusterKey{},
	&encode.EndpointsKey{},
	&encode.VirtualHostKey{}, &encode.OutboundListenerKey{}, &encode.VirtualOutboundKey{}, &encode.VirtualInboundKey{}, &encode.GRPCListenerKey{}, &encode.GRPCServerListenerKey{},
	&encode.GatewayListenerKey{}, &encode.GatewayVirtualHostKey{}, &encode.NameTableKey{}, &encode.SecretKey{},
	&encode.SidecarIngressListenerKey{}, &encode.SidecarInboundClusterKey{},
}

// hashExempt lists the types a key may hold without feeding them to Hash,
// with the reason. Nothing else is exempt.
var hashExempt = map[reflect.Type]string{
	// Resolves interned IDs to strings. Symbols are append-only and never
	// reused, so Sym -> string is a fixed function; the Syms in a key (and
	// the rows' hashes, which are computed over Syms) already identify the
	// strings.
	reflect.TypeFor[*index.Symbols](): "append-only, deterministic Sym resolver",
	// Resolves LabelSetIDs to labels, append-only like Symbols: the IDs in
	// the key identify the label sets.
	reflect.TypeFor[*index.LabelSets](): "append-only, deterministic label-set resolver",
}

// A row is a struct with a content hash computed once at ingest (Service,
// EndpointShard, Config...): keys hash a row by its Hash, so the test
// mutates that.
func isRow(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return false
	}
	f, ok := t.Elem().FieldByName("Hash")
	return ok && f.Type.Kind() == reflect.Uint64
}

// TestKeysHashEveryField: for every key type and every field (recursively
// into value structs, pointed-to structs without a content hash, and the
// first element of slices; for row pointers, the row's Hash), a key that
// differs from a fully populated one in that field alone must hash
// differently. A key field its Hash forgets is a cached resource that
// silently ignores an input.
func TestKeysHashEveryField(t *testing.T) {
	for _, k := range keyTypes {
		typ := reflect.TypeOf(k).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			base := reflect.New(typ)
			fill(base.Elem())
			baseHash := base.Interface().(encode.Key).Hash()
			if again := deepCopy(base).Interface().(encode.Key).Hash(); again != baseHash {
				t.Fatalf("Hash is not a function of the fields: %x then %x", baseHash, again)
			}
			n := 0
			visitLeaves(typ.Name(), typ, func(r reflect.Value) reflect.Value { return r.Elem() }, func(path string, mutate func(reflect.Value)) {
				n++
				c := deepCopy(base)
				mutate(c)
				if c.Interface().(encode.Key).Hash() == baseHash {
					t.Errorf("%s: changing it does not change Hash()", path)
				}
			})
			if n == 0 {
				t.Fatal("no fields visited")
			}
			t.Logf("%d field mutations checked", n)
		})
	}
}

// TestKeysHashAllocs: hashing a key allocates nothing.
func TestKeysHashAllocs(t *testing.T) {
	for _, k := range keyTypes {
		v := reflect.New(reflect.TypeOf(k).Elem())
		fill(v.Elem())
		key := v.Interface().(encode.Key)
		if n := testing.AllocsPerRun(100, func() { _ = key.Hash() }); n != 0 {
			t.Errorf("%T.Hash allocates %v times", key, n)
		}
	}
}

// visitLeaves calls leaf for every mutable input reachable from a value of
// type typ located by at(root).
func visitLeaves(path string, typ reflect.Type, at func(reflect.Value) reflect.Value, leaf func(string, func(reflect.Value))) {
	if _, ok := hashExempt[typ]; ok {
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if isHashCache(f) {
				continue
			}
			if !f.IsExported() {
				panic(fmt.Sprintf("%s.%s: unexported key field; the reflection test cannot vary it", path, f.Name))
			}
			visitLeaves(path+"."+f.Name, f.Type, func(r reflect.Value) reflect.Value { return at(r).Field(i) }, leaf)
		}
	case reflect.Pointer:
		leaf(path+"=nil", func(r reflect.Value) { at(r).SetZero() })
		if isRow(typ) {
			leaf(path+".Hash", func(r reflect.Value) {
				h := at(r).Elem().FieldByName("Hash")
				h.SetUint(h.Uint() + 1)
			})
			return
		}
		visitLeaves(path, typ.Elem(), func(r reflect.Value) reflect.Value { return at(r).Elem() }, leaf)
	case reflect.Slice:
		leaf(path+"+elem", func(r reflect.Value) {
			s := at(r)
			e := reflect.New(typ.Elem()).Elem()
			fill(e)
			s.Set(reflect.Append(s, e))
		})
		leaf(path+"=nil", func(r reflect.Value) { at(r).SetZero() })
		visitLeaves(path+"[0]", typ.Elem(), func(r reflect.Value) reflect.Value { return at(r).Index(0) }, leaf)
	case reflect.Map:
		leaf(path+"+entry", func(r reflect.Value) {
			k, v := reflect.New(typ.Key()).Elem(), reflect.New(typ.Elem()).Elem()
			fill(k)
			mutateScalar(k)
			fill(v)
			at(r).SetMapIndex(k, v)
		})
	case reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		panic(fmt.Sprintf("%s: %s in a key: hash it explicitly and teach this test how to vary it", path, typ))
	default:
		leaf(path, func(r reflect.Value) { mutateScalar(at(r)) })
	}
}

// isHashCache: an unexported atomic.Uint64 named hash caches the hash of
// its struct's other fields (Mesh): it is not an input.
func isHashCache(f reflect.StructField) bool {
	return f.Name == "hash" && f.Type == reflect.TypeFor[atomic.Uint64]()
}

func mutateScalar(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				mutateScalar(v.Field(i))
				return
			}
		}
	}
}

// fill sets every field reachable from v to a non-zero value, so that each
// mutation (including to nil or zero) is a change.
func fill(v reflect.Value) {
	if _, ok := hashExempt[v.Type()]; ok {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.String:
		v.SetString("s")
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

// deepCopy copies v (a pointer, struct, slice or map) so that mutating the
// copy leaves the original untouched. Exempt resolvers are shared.
func deepCopy(v reflect.Value) reflect.Value {
	if _, ok := hashExempt[v.Type()]; ok {
		return v
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(deepCopy(v.Elem()))
		return n
	case reflect.Struct:
		n := reflect.New(v.Type()).Elem()
		n.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				n.Field(i).Set(deepCopy(v.Field(i)))
			} else if isHashCache(f) {
				// A copy is a value to vary: it computes its own hash.
				c := n.Field(i)
				reflect.NewAt(c.Type(), unsafe.Pointer(c.UnsafeAddr())).Elem().SetZero()
			}
		}
		return n
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			n.Index(i).Set(deepCopy(v.Index(i)))
		}
		return n
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			n.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return n
	default:
		return v
	}
}
