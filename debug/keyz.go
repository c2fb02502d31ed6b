package debug

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// /debug/keyz: the cache key a proxy's resource was built from, every
// input rendered field by field. A generator sees nothing but its key, so
// this is the complete list of what the resource depends on. The resource
// is regenerated alone for the proxy's class through a recording cache;
// the keys of the parts it is assembled from (virtual hosts, filter
// chains) come with it.

// KeyzView is the answer of /debug/keyz.
type KeyzView struct {
	Proxy    string        `json:"proxy"`
	Resource string        `json:"resource"`
	TypeURL  string        `json:"typeUrl"`
	Class    any           `json:"class"`
	Keys     []RecordedKey `json:"keys"`
}

// RecordedKey is one cache lookup made while building the resource.
type RecordedKey struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Hash is the key's hash in hex: the cache entry's version.
	Hash   string `json:"hash"`
	Fields any    `json:"fields"`
}

// keyz finds the key of resource name for c's proxy. typeURL, when given
// (a full type URL or cds, eds, lds, rds), limits the search to that type;
// otherwise the proxy's subscribed types are tried in push order.
func keyz(e *engine.Engine, c serve.ConnInfo, name, typeURL string) (*KeyzView, error) {
	ec, ok := e.Conn(c.ID)
	if !ok {
		return nil, fmt.Errorf("stream %s has no engine connection (it just closed?)", c.ID)
	}
	types := []string{engine.TypeCluster, engine.TypeEndpoint, engine.TypeListener, engine.TypeRoute}
	if typeURL != "" {
		types = []string{longTypeURL(typeURL)}
	}
	snap := e.Snapshot()
	r := keyRenderer{snap: snap}
	for _, t := range types {
		if t == engine.TypeEndpoint && !hasCluster(ec, name) {
			continue // EDS answers any name, with an empty assignment
		}
		var keys []RecordedKey
		rec := func(kind encode.Kind, n string, k encode.Key) {
			// Parts are kept whatever their names; whole resources only
			// when they are the one asked for.
			if kind != encode.KindVirtualHost && kind != encode.KindFilterChain && n != name {
				return
			}
			keys = append(keys, RecordedKey{Kind: kind.String(), Name: n, Hash: strconv.FormatUint(k.Hash(), 16),
				Fields: r.render(reflect.ValueOf(k), 0)})
		}
		res, err := ec.Resources(t, []string{name}, false, rec)
		if err != nil {
			continue
		}
		// RDS, like EDS, answers any name (with an empty configuration):
		// a resource built from no key is not one the proxy has.
		if len(keys) == 0 || !slices.ContainsFunc(res, func(x engine.Resource) bool { return x.Name == name }) {
			continue
		}
		class := ec.Class()
		return &KeyzView{Proxy: c.ID, Resource: name, TypeURL: t, Class: r.render(reflect.ValueOf(&class), 0), Keys: keys}, nil
	}
	return nil, fmt.Errorf("keyz: proxy %s has no resource named %q (types tried: %v)", c.ID, name, types)
}

// hasCluster reports whether the proxy's clusters include name.
func hasCluster(ec *engine.Conn, name string) bool {
	res, err := ec.Resources(engine.TypeCluster, []string{name}, false, nil)
	return err == nil && slices.ContainsFunc(res, func(x engine.Resource) bool { return x.Name == name })
}

// longTypeURL accepts istiod's short type names.
func longTypeURL(t string) string {
	switch t {
	case "cds", "CDS":
		return engine.TypeCluster
	case "eds", "EDS":
		return engine.TypeEndpoint
	case "lds", "LDS":
		return engine.TypeListener
	case "rds", "RDS":
		return engine.TypeRoute
	}
	return t
}

// keyRenderer turns a key into JSON-ready values: interned symbols and
// label sets resolved to strings, config objects by kind and name with
// their spec, tables left out (a key points at the whole symbol table but
// depends only on the symbols it names).
type keyRenderer struct{ snap *index.Snapshot }

const (
	maxRenderDepth = 8
	maxRenderElems = 64
)

var (
	symType       = reflect.TypeFor[index.Sym]()
	labelSetType  = reflect.TypeFor[index.LabelSetID]()
	symbolsType   = reflect.TypeFor[*index.Symbols]()
	labelSetsType = reflect.TypeFor[*index.LabelSets]()
	configType    = reflect.TypeFor[*index.Config]()
	protoType     = reflect.TypeFor[proto.Message]()
	stringerType  = reflect.TypeFor[fmt.Stringer]()
)

func (r *keyRenderer) render(v reflect.Value, depth int) any {
	if !v.IsValid() {
		return nil
	}
	if depth > maxRenderDepth {
		return "…"
	}
	t := v.Type()
	switch t {
	case symType:
		return r.snap.String(index.Sym(v.Uint()))
	case labelSetType:
		return labelMapOf(r.snap, index.LabelSetID(v.Uint()))
	case symbolsType:
		return "(symbol table)"
	case labelSetsType:
		return "(label sets)"
	case configType:
		if v.IsNil() {
			return nil
		}
		return r.config(v)
	}
	if v.CanInterface() && t.Implements(protoType) {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return nil
		}
		if b, err := protojson.Marshal(v.Interface().(proto.Message)); err == nil {
			return json.RawMessage(b)
		}
	}
	if v.CanInterface() && t.Kind() != reflect.Pointer && t.Kind() != reflect.Struct && t.Implements(stringerType) {
		return v.Interface().(fmt.Stringer).String()
	}
	if v.CanInterface() && t.Kind() == reflect.Struct && t.Implements(stringerType) && t.PkgPath() == "net/netip" {
		return v.Interface().(fmt.Stringer).String()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return r.render(v.Elem(), depth+1)
	case reflect.Struct:
		m := map[string]any{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			m[f.Name] = r.render(v.Field(i), depth+1)
		}
		return m
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 && t.Elem() != symType {
			return fmt.Sprintf("%d bytes", v.Len())
		}
		n := min(v.Len(), maxRenderElems)
		out := make([]any, 0, n+1)
		for i := 0; i < n; i++ {
			out = append(out, r.render(v.Index(i), depth+1))
		}
		if v.Len() > n {
			out = append(out, fmt.Sprintf("… %d more", v.Len()-n))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		m := map[string]any{}
		it := v.MapRange()
		for it.Next() {
			if len(m) == maxRenderElems {
				m["…"] = fmt.Sprintf("%d more", v.Len()-maxRenderElems)
				break
			}
			m[fmt.Sprint(r.render(it.Key(), depth+1))] = r.render(it.Value(), depth+1)
		}
		return m
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.String:
		return v.String()
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return fmt.Sprintf("(%s)", t)
	}
	return fmt.Sprintf("(%s)", t)
}

// config renders a config object by identity, generation and spec.
func (r *keyRenderer) config(v reflect.Value) any {
	c := v.Interface().(*index.Config)
	out := map[string]any{
		"kind":       c.Kind.String(),
		"namespace":  r.snap.String(c.Key.Namespace),
		"name":       r.snap.String(c.Key.Name),
		"generation": c.Generation,
	}
	if m, ok := c.Spec.(proto.Message); ok {
		if b, err := protojson.Marshal(m); err == nil {
			out["spec"] = json.RawMessage(b)
		}
	}
	return out
}

func labelMapOf(snap *index.Snapshot, id index.LabelSetID) map[string]string {
	ls := snap.Labels.Get(id)
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[snap.String(l.Key)] = snap.String(l.Value)
	}
	return m
}
