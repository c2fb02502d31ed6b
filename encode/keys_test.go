package encode_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// keyTypes lists a value of every generator key type of package encode,
// for reflection. TestKeyTypesListed checks it against the key types the
// package's source declares (the types with the Key marker method), so a
// key type missing here fails the tests instead of escaping them.
var keyTypes = []encode.Key{
	&encode.ClusterKey{},
	&encode.EndpointsKey{},
	&encode.VirtualHostKey{}, &encode.OutboundListenerKey{}, &encode.VirtualOutboundKey{}, &encode.VirtualInboundKey{}, &encode.GRPCListenerKey{}, &encode.GRPCServerListenerKey{},
	&encode.GatewayListenerKey{}, &encode.GatewayVirtualHostKey{}, &encode.GatewayRoutesKey{}, &encode.NameTableKey{}, &encode.SecretKey{},
	&encode.SidecarIngressListenerKey{}, &encode.SidecarInboundClusterKey{}, &encode.RouteConfigKey{}, &encode.EgressCatchAllKey{}, &encode.AddedKey{},
	&encode.ExtensionConfigKey{}, &encode.PatchExtensionConfigKey{},
}

// TestKeyTypesListed: the key types are found in the package's source, not
// listed by hand: every type with a method named key (the unexported
// marker of encode.Key, which no other package can implement) in a
// non-test file is in keyTypes, and nothing else is.
func TestKeyTypesListed(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || fd.Name.Name != "key" || len(fd.Recv.List) != 1 {
					continue
				}
				typ := fd.Recv.List[0].Type
				if st, ok := typ.(*ast.StarExpr); ok {
					typ = st.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					found[id.Name] = true
				}
			}
		}
	}
	if len(found) == 0 {
		t.Fatal("no key type found in the source")
	}
	listed := map[string]bool{}
	for _, k := range keyTypes {
		listed[reflect.TypeOf(k).Elem().Name()] = true
	}
	for name := range found {
		if !listed[name] {
			t.Errorf("key type %s is not in keyTypes: add it, so that the key tests cover it", name)
		}
	}
	for name := range listed {
		if !found[name] {
			t.Errorf("keyTypes lists %s, which has no key marker", name)
		}
	}
}

// TestKeysHoldValuesOnly: a key holds values — scalars, strings, value
// structs, slices of values — and references only to what cannot change:
// immutable index rows (a content hash stands for them) and cache entries
// (their version names their bytes). A pointer to a table (index.Symbols,
// index.LabelSets, a snapshot), a map, a function, an interface or a
// channel in a key is an input the key's hash does not pin down.
func TestKeysHoldValuesOnly(t *testing.T) {
	for _, k := range keyTypes {
		typ := reflect.TypeOf(k).Elem()
		for _, v := range valueViolations(typ.Name(), typ, map[reflect.Type]bool{}) {
			t.Errorf("%s", v)
		}
	}
}

// TestValueViolationsCatches: the checker itself finds each kind of
// forbidden field.
func TestValueViolationsCatches(t *testing.T) {
	type inner struct{ M map[string]int }
	type bad struct {
		Syms   *index.Symbols
		Labels *index.LabelSets
		Snap   *index.Snapshot
		M      map[string]string
		F      func() int
		I      any
		C      chan int
		Nested []inner
		Row    *index.Service // allowed
	}
	got := valueViolations("bad", reflect.TypeFor[bad](), map[reflect.Type]bool{})
	for _, want := range []string{"bad.Syms", "bad.Labels", "bad.Snap", "bad.M", "bad.F", "bad.I", "bad.C", "bad.Nested[0].M"} {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, want+":") }) {
			t.Errorf("no violation reported for %s (got %q)", want, got)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d violations, want 8: %q", len(got), got)
	}
}

// valueViolations lists the fields reachable from typ that a key may not
// hold.
func valueViolations(path string, typ reflect.Type, seen map[reflect.Type]bool) []string {
	switch typ.Kind() {
	case reflect.Struct:
		if seen[typ] {
			return nil
		}
		seen[typ] = true
		defer delete(seen, typ)
		var out []string
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if isHashCache(f) {
				continue
			}
			out = append(out, valueViolations(path+"."+f.Name, f.Type, seen)...)
		}
		return out
	case reflect.Pointer:
		switch {
		case isRow(typ), typ == entryType, typ == patchSetType:
			return nil // immutable, hashed by content (a patch set by its Digest)
		case typ.Elem().PkgPath() == encodePkg && typ.Elem().Kind() == reflect.Struct:
			return valueViolations(path, typ.Elem(), seen) // a value the key owns
		}
		return []string{path + ": pointer to " + typ.Elem().String() + ", which can change"}
	case reflect.Slice, reflect.Array:
		return valueViolations(path+"[0]", typ.Elem(), seen)
	case reflect.Map, reflect.Func, reflect.Interface, reflect.Chan, reflect.UnsafePointer:
		return []string{path + ": " + typ.Kind().String()}
	}
	return nil
}

var (
	entryType = reflect.TypeFor[*encode.Entry]()
	// patchSetType: an interned, immutable set of EnvoyFilter patches.
	patchSetType = reflect.TypeFor[*envoypatch.Set]()
	encodePkg    = reflect.TypeFor[encode.Entry]().PkgPath()
	indexPkg     = reflect.TypeFor[index.Service]().PkgPath()
)

// A row is an index struct with a content hash computed once at ingest
// (Service, EndpointShard, Config...), immutable once published: keys
// hash a row by its Hash, so the test mutates that.
func isRow(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct || t.Elem().PkgPath() != indexPkg {
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
		if typ == patchSetType {
			leaf(path+".Digest", func(r reflect.Value) {
				d := at(r).Elem().FieldByName("Digest")
				d.SetUint(d.Uint() + 1)
			})
			return
		}
		if typ == entryType {
			leaf(path+".Version", func(r reflect.Value) {
				v := at(r).Elem().FieldByName("Version")
				v.SetString(v.String() + "x")
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
		if v.Type() == patchSetType {
			v.Set(reflect.ValueOf(&envoypatch.Set{Digest: 7}))
			return
		}
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
// copy leaves the original untouched.
func deepCopy(v reflect.Value) reflect.Value {
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
