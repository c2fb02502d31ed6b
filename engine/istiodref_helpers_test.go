package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// The steps the tests comparing pilotfish with istiod on a case of
// internal/istiodref share: load the case and its mesh, run an engine on
// its config, connect each proxy, generate its listeners (validated, as
// generic JSON like istiod's dump), and walk both sides' listeners and
// filter chains by name. What each test compares stays in its file.

// kubeAPIListener is the outbound listener of the reference API server's
// own Service (default/kubernetes), which istiod reads and config.yaml
// does not hold.
const kubeAPIListener = "10.96.0.1_443"

// loadMeshCase loads a case with a mesh.yaml; it skips the test when
// istiod's dumps of the case are not produced yet.
func loadMeshCase(t *testing.T, name string) *istiodref.Case {
	t.Helper()
	c, err := istiodref.LoadCase(name)
	if err != nil {
		t.Fatal(err)
	}
	if c.Mesh == nil {
		t.Fatalf("case %s has no mesh.yaml", name)
	}
	for _, p := range c.Proxies {
		if _, err := os.Stat(c.DumpFile(p)); err != nil {
			t.Skipf("istiod's output not produced yet (make istiod-ref CASE=%s): %v", name, err)
		}
	}
	return c
}

// telemetryCaseMesh is the mesh pilotfish builds from the case's mesh.yaml
// through MeshSettings, as serve does from ConfigMap istio.
func telemetryCaseMesh(t *testing.T, c *istiodref.Case) *encode.Mesh {
	t.Helper()
	cfg, err := inject.ParseMesh(c.Mesh)
	if err != nil {
		t.Fatalf("%s/mesh.yaml: %v", c.Name, err)
	}
	m, err := MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		t.Fatalf("%s/mesh.yaml: %v", c.Name, err)
	}
	return m
}

// caseEngine is an engine with opts on the case's config.yaml.
func caseEngine(t *testing.T, c *istiodref.Case, opts Options) *Engine {
	t.Helper()
	sm := scenario.NewMesh()
	if err := sm.Apply(c.Name+"/config.yaml", c.Config); err != nil {
		t.Fatal(err)
	}
	return New(sm.W, opts)
}

// refNode is the node of id with metadata md, as the reference harness
// sends it.
func refNode(t *testing.T, id string, md map[string]any) *corev3.Node {
	t.Helper()
	s, err := structpb.NewStruct(md)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: id, Metadata: s}
}

// connectNode connects n to e under a minute's deadline. The connection
// closes when the test ends; Close ends it earlier.
func connectNode(t *testing.T, e *Engine, n *corev3.Node) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	conn, err := e.Connect(ctx, n, "")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); cancel() })
	return conn
}

// listenersJSON generates every listener of conn, checks each with
// Envoy's validation and returns them as generic JSON by name. A
// validation error containing known (when not empty) is only logged: the
// caller documents it as one istiod's output has too.
func listenersJSON(t *testing.T, conn *Conn, proxy, known string) map[string]map[string]any {
	t.Helper()
	rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, r := range rs {
		var a anypb.Any
		var l listenerv3.Listener
		if err := proto.Unmarshal(r.Any, &a); err != nil {
			t.Fatal(err)
		}
		if err := a.UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		if err := xdstest.Validate(&l); err != nil {
			if known != "" && strings.Contains(err.Error(), known) {
				t.Logf("%s: listener %s: %v (as in istiod's output)", proxy, r.Name, err)
			} else {
				t.Errorf("%s: listener %s: %v", proxy, r.Name, err)
			}
		}
		out[r.Name], _ = anyJSON(t, r.Any).(map[string]any)
	}
	return out
}

// refProxy is one proxy of a case: istiod's dump for it, its connection to
// pilotfish's engine and pilotfish's listeners (validated, generic JSON).
type refProxy struct {
	istiodref.Proxy
	dump      *istiodref.Dump
	conn      *Conn
	listeners map[string]map[string]any
}

// eachRefProxy calls f with each proxy of c connected to e, in the case's
// order, and closes its connection after; known is listenersJSON's.
func eachRefProxy(t *testing.T, c *istiodref.Case, e *Engine, known string, f func(rp *refProxy)) {
	t.Helper()
	for _, p := range c.Proxies {
		dump, err := istiodref.ReadDump(c.DumpFile(p))
		if err != nil {
			t.Fatalf("%v (make istiod-ref CASE=%s)", err, c.Name)
		}
		conn := connectNode(t, e, refNode(t, p.ID, p.Metadata))
		f(&refProxy{Proxy: p, dump: dump, conn: conn, listeners: listenersJSON(t, conn, p.Name, known)})
		conn.Close()
	}
}

// eachListener calls f, in name order, with each listener istiod sends
// the proxy and pilotfish's of the same name. One pilotfish does not send
// is a difference appended to diffs, but the API server's own listener
// (kubeAPIListener), which the case's config does not hold.
func (rp *refProxy) eachListener(diffs *[]string, f func(name string, istiod, pilotfish map[string]any)) {
	for _, ln := range slices.Sorted(mapKeys(rp.dump.Listeners)) {
		g, ok := rp.listeners[ln]
		if !ok && ln == kubeAPIListener {
			continue
		}
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: listener %s: pilotfish sends none", rp.Name, ln))
			continue
		}
		f(ln, rp.dump.Listeners[ln], g)
	}
}

// chainID is a filter chain's id (generic JSON), "NAME MATCH": its name
// and its match as JSON, the key pairing istiod's chains with pilotfish's.
func chainID(t *testing.T, fc map[string]any) string {
	t.Helper()
	return fmt.Sprintf("%v %s", fc["name"], jsonString(t, fc["filterChainMatch"]))
}

// eachChain calls f with each filter chain of listener l (generic JSON),
// the default chain last, and its id (chainID).
func eachChain(t *testing.T, l map[string]any, f func(id string, fc map[string]any)) {
	t.Helper()
	for _, fc := range jsonList(l["filterChains"]) {
		m, _ := fc.(map[string]any)
		f(chainID(t, m), m)
	}
	if d, ok := l["defaultFilterChain"].(map[string]any); ok {
		f(chainID(t, d), d)
	}
}

// eachHCM calls f with the typed config of each HTTP connection manager
// of listener l (generic JSON) and its chain's id (eachChain's).
func eachHCM(t *testing.T, l map[string]any, f func(id string, hcm map[string]any)) {
	t.Helper()
	eachChain(t, l, func(id string, fc map[string]any) {
		for _, fl := range jsonList(fc["filters"]) {
			fm, _ := fl.(map[string]any)
			if fm["name"] != "envoy.filters.network.http_connection_manager" {
				continue
			}
			tc, _ := fm["typedConfig"].(map[string]any)
			f(id, tc)
		}
	})
}

// listenerBytes generates every listener of node id (metadata md) on e
// and returns their encoded bytes by name.
func listenerBytes(t *testing.T, e *Engine, id string, md map[string]any) map[string]string {
	t.Helper()
	conn := connectNode(t, e, refNode(t, id, md))
	defer conn.Close()
	rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rs {
		out[r.Name] = string(r.Any)
	}
	return out
}

// listenerCacheStats are the cache's listener figures.
func listenerCacheStats(t *testing.T, cache *encode.Cache) encode.Stats {
	t.Helper()
	for _, s := range cache.Stats() {
		if s.Kind == encode.KindListener.String() {
			return s
		}
	}
	t.Fatal("no listener cache stats")
	return encode.Stats{}
}

func jsonList(v any) []any { l, _ := v.([]any); return l }

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// anyJSON renders an encoded Any's message as generic JSON, as the dump
// reader gives istiod's.
func anyJSON(t *testing.T, b []byte) any {
	t.Helper()
	return messageJSON(t, anyMessage(t, b))
}

// anyMessage decodes an encoded Any's message.
func anyMessage(t *testing.T, b []byte) proto.Message {
	t.Helper()
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// messageJSON renders m as generic JSON (protojson's field names).
func messageJSON(t *testing.T, m proto.Message) any {
	t.Helper()
	js, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
