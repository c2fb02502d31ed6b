package envoypatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"
)

// These tests check application against istiod alone, independently of
// pilotfish's generators: istiod's output for a case without its
// EnvoyFilters (case <name>-plain), patched here with the case's filters,
// must equal istiod's output for the case with them, resource by resource.

const (
	caseDir  = "../internal/istiodref/testdata"
	rootNS   = "istio-system"
	typedURL = "type.googleapis.com/udpa.type.v1.TypedStruct"
)

// refProxy is one proxy of a case's proxies.yaml.
type refProxy struct {
	Name     string         `json:"name"`
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata"`
}

func (p refProxy) router() bool { return strings.HasPrefix(p.ID, "router~") }

func (p refProxy) meta(k string) string { s, _ := p.Metadata[k].(string); return s }

// refFilter is an EnvoyFilter of a case's config.yaml with what istiod
// selects and orders it by.
type refFilter struct {
	ns, name string
	created  time.Time
	spec     *networking.EnvoyFilter
}

func readFilters(t *testing.T, name string) []refFilter {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(caseDir, name, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []refFilter
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace   string
				CreationTimestamp time.Time `json:"creationTimestamp"`
			} `json:"metadata"`
			Spec json.RawMessage `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if obj.Kind != "EnvoyFilter" {
			continue
		}
		ef := &networking.EnvoyFilter{}
		if err := protojson.Unmarshal(obj.Spec, ef); err != nil {
			t.Fatalf("%s: EnvoyFilter %s: %v", name, obj.Metadata.Name, err)
		}
		out = append(out, refFilter{obj.Metadata.Namespace, obj.Metadata.Name, obj.Metadata.CreationTimestamp, ef})
	}
	return out
}

// proxySet is the Set istiod applies to a proxy (push_context.go
// EnvoyFilters): root namespace and the proxy's namespace, by workload
// selector, ordered by priority, root namespace first, creation time,
// name.namespace; patches kept by their proxy match.
func proxySet(t *testing.T, filters []refFilter, p refProxy) *Set {
	t.Helper()
	ns := p.meta("NAMESPACE")
	labels, _ := p.Metadata["LABELS"].(map[string]any)
	var sel []refFilter
	for _, f := range filters {
		if f.ns != rootNS && f.ns != ns {
			continue
		}
		ok := true
		for k, v := range f.spec.GetWorkloadSelector().GetLabels() {
			if labels[k] != v {
				ok = false
			}
		}
		if ok && len(f.spec.GetTargetRefs()) == 0 {
			sel = append(sel, f)
		}
	}
	sort.SliceStable(sel, func(i, j int) bool {
		a, b := sel[i], sel[j]
		if a.spec.GetPriority() != b.spec.GetPriority() {
			return a.spec.GetPriority() < b.spec.GetPriority()
		}
		if (a.ns == rootNS) != (b.ns == rootNS) {
			return a.ns == rootNS
		}
		if !a.created.Equal(b.created) {
			return a.created.Before(b.created)
		}
		return a.name+"."+a.ns < b.name+"."+b.ns
	})
	var patches []*Patch
	for _, f := range sel {
		c, err := Compile(f.ns, f.name, f.spec)
		if err != nil {
			t.Fatalf("%s/%s: %v", f.ns, f.name, err)
		}
		for _, pt := range c.Patches {
			if pt.MatchesProxy(p.meta("ISTIO_VERSION"), p.meta) {
				patches = append(patches, pt)
			}
		}
	}
	return NewSet(patches)
}

func readProxies(t *testing.T, name string) []refProxy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(caseDir, name, "proxies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Proxies []refProxy `json:"proxies"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Proxies
}

// refDump is one istiod config dump's dynamic resources, as messages.
type refDump struct {
	clusters     map[string]*cluster.Cluster
	clusterOrder []string
	listeners    map[string]*listener.Listener
	routes       map[string]*route.RouteConfiguration
	// prefiltered counts the resources a MayPatch prefilter ruled out
	// (their keys would stay the unpatched ones).
	prefiltered int
}

func readDump(t *testing.T, file string) *refDump {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Skipf("no istiod dump (make istiod-ref CASE=...): %v", err)
	}
	var doc struct {
		Configs []map[string]json.RawMessage `json:"configs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	d := &refDump{clusters: map[string]*cluster.Cluster{}, listeners: map[string]*listener.Listener{},
		routes: map[string]*route.RouteConfiguration{}}
	items := func(c map[string]json.RawMessage, list, field string) []json.RawMessage {
		var xs []map[string]json.RawMessage
		_ = json.Unmarshal(c[list], &xs)
		var out []json.RawMessage
		for _, x := range xs {
			f := field
			if f == "activeState.listener" {
				var st map[string]json.RawMessage
				_ = json.Unmarshal(x["activeState"], &st)
				x, f = st, "listener"
			}
			if r := x[f]; r != nil {
				out = append(out, r)
			}
		}
		return out
	}
	for _, c := range doc.Configs {
		var typ string
		_ = json.Unmarshal(c["@type"], &typ)
		switch typ {
		case "type.googleapis.com/envoy.admin.v3.ClustersConfigDump":
			for _, r := range items(c, "dynamicActiveClusters", "cluster") {
				m := &cluster.Cluster{}
				fromDump(t, r, m)
				d.clusters[m.GetName()] = m
				d.clusterOrder = append(d.clusterOrder, m.GetName())
			}
		case "type.googleapis.com/envoy.admin.v3.ListenersConfigDump":
			for _, r := range items(c, "dynamicListeners", "activeState.listener") {
				m := &listener.Listener{}
				fromDump(t, r, m)
				d.listeners[m.GetName()] = m
			}
		case "type.googleapis.com/envoy.admin.v3.RoutesConfigDump":
			for _, r := range items(c, "dynamicRouteConfigs", "routeConfig") {
				m := &route.RouteConfiguration{}
				fromDump(t, r, m)
				d.routes[m.GetName()] = m
			}
		}
	}
	return d
}

// fromDump decodes a dumped resource; typed configs of types this build
// does not link (istiod's own filters) become TypedStructs on both sides
// of a comparison alike.
func fromDump(t *testing.T, raw json.RawMessage, m proto.Message) {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	v = wrapUnknown(v, true)
	b, _ := json.Marshal(v)
	if err := protojson.Unmarshal(b, m); err != nil {
		t.Fatalf("decoding %.200s: %v", b, err)
	}
}

func wrapUnknown(v any, top bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = wrapUnknown(e, false)
		}
		url, _ := x["@type"].(string)
		if top {
			delete(x, "@type")
		} else if url != "" {
			if _, err := protoregistry.GlobalTypes.FindMessageByURL(url); err != nil {
				delete(x, "@type")
				return map[string]any{"@type": typedURL, "typeUrl": url, "value": x}
			}
		}
	case []any:
		for i, e := range x {
			x[i] = wrapUnknown(e, false)
		}
	}
	return v
}

// canonical is a message as generic JSON, Anys expanded, for comparison
// and for diffs that name fields.
func canonical(t *testing.T, m proto.Message) any {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// diff lists the paths where two generic JSON values differ.
func diff(path string, a, b any, out *[]string) {
	if len(*out) > 8 {
		return
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		for k := range keys {
			diff(path+"."+k, x[k], y[k], out)
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		for i := range x {
			diff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		*out = append(*out, fmt.Sprintf("%s: pilotfish %.300s, istiod %.300s", path, ja, jb))
	}
}

func compare(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	g, w := canonical(t, got), canonical(t, want)
	if reflect.DeepEqual(g, w) {
		return
	}
	var d []string
	diff("", g, w, &d)
	t.Errorf("%s differs from istiod's:\n  %s", what, strings.Join(d, "\n  "))
}

// clusterContext is the patch context istiod builds a sidecar's cluster
// in, by its name.
func clusterContext(name string, router bool) Context {
	switch {
	case router:
		return Gateway
	case strings.HasPrefix(name, "inbound|"), strings.HasPrefix(name, "InboundPassthroughCluster"):
		return Inbound
	}
	return Outbound
}

// clusterServices are the services of an inbound cluster, from the
// metadata istiod puts on it (filter_metadata.istio.services[].host).
func clusterServices(c *cluster.Cluster) []string {
	var hosts []string
	for _, s := range c.GetMetadata().GetFilterMetadata()["istio"].GetFields()["services"].GetListValue().GetValues() {
		hosts = append(hosts, s.GetStructValue().GetFields()["host"].GetStringValue())
	}
	return hosts
}

// applyToDump patches istiod's unpatched resources of one proxy as istiod
// does when it generates them, and checks that the MayPatch prefilters
// allow every resource a patch changed.
func applyToDump(t *testing.T, s *Set, d *refDump, p refProxy) *refDump {
	t.Helper()
	out := &refDump{clusters: map[string]*cluster.Cluster{}, listeners: map[string]*listener.Listener{},
		routes: map[string]*route.RouteConfiguration{}}
	fail := func(what string, fs []Failure) {
		for _, f := range fs {
			t.Errorf("%s: patch %s[%d]: %v", what, f.Patch.Source, f.Patch.Index, f.Err)
		}
	}
	for _, name := range d.clusterOrder {
		c := proto.Clone(d.clusters[name]).(*cluster.Cluster)
		var hosts []string
		if strings.HasPrefix(name, "inbound|") {
			hosts = clusterServices(c)
		}
		ctx := clusterContext(name, p.router())
		pc, fs := s.PatchClusterOfServices(ctx, c, hosts)
		fail("cluster "+name, fs)
		// The prefilter must allow every cluster a patch changes.
		dir, subset, host, port := parseSubsetKey(name)
		if dir == "inbound" {
			host = ""
		}
		if may := s.MayPatchCluster(ctx, host, uint32(port), subset); !may {
			out.prefiltered++
		}
		if !s.MayPatchCluster(ctx, host, uint32(port), subset) && !proto.Equal(pc, d.clusters[name]) {
			t.Errorf("cluster %s: patched, but MayPatchCluster(%v, %q, %d, %q) is false", name, ctx, host, port, subset)
		}
		if pc != nil {
			out.clusters[name] = pc
		}
	}
	ctxs := []Context{Outbound, Inbound}
	if p.router() {
		ctxs = []Context{Gateway}
	}
	for _, c := range ctxs {
		for _, a := range s.AddedClusters(c) {
			out.clusters[a.GetName()] = a
		}
		for _, a := range s.AddedListeners(c) {
			out.listeners[a.GetName()] = a
		}
	}
	for name, l := range d.listeners {
		l = proto.Clone(l).(*listener.Listener)
		c := Outbound
		switch {
		case p.router():
			c = Gateway
		case name == virtualInbound:
			c = Inbound
			patchInlineRoutes(t, s, l)
		}
		pl, fs := s.PatchListener(c, l)
		fail("listener "+name, fs)
		port := l.GetAddress().GetSocketAddress().GetPortValue()
		if isVirtual(l) {
			port = 0
		}
		if !s.MayPatchListener(c, port) {
			out.prefiltered++
		}
		if !s.MayPatchListener(c, port) && !proto.Equal(pl, d.listeners[name]) {
			t.Errorf("listener %s: patched, but MayPatchListener(%v, %d) is false", name, c, port)
		}
		if pl != nil {
			out.listeners[name] = pl
		}
	}
	requested := rdsNames(t, out.listeners)
	for name, r := range d.routes {
		if !requested[name] {
			continue // its listener was removed: no proxy asks for it
		}
		c := Outbound
		if p.router() {
			c = Gateway
		}
		pr, fs := s.PatchRouteConfiguration(c, proto.Clone(r).(*route.RouteConfiguration), nil)
		fail("route "+name, fs)
		if parts := patchAsParts(t, s, c, proto.Clone(r).(*route.RouteConfiguration), nil); !proto.Equal(parts, pr) {
			t.Errorf("route %s: patched as encoded virtual hosts, it differs from the message form:\n%v\n%v", name, parts, pr)
		}
		if !s.MayPatchRouteConfig(c, name) {
			out.prefiltered++
		}
		if !s.MayPatchRouteConfig(c, name) && !proto.Equal(pr, r) {
			t.Errorf("route %s: patched, but MayPatchRouteConfig(%v, %q) is false", name, c, name)
		}
		out.routes[name] = pr
	}
	return out
}

// rdsNames are the route configurations the listeners' connection
// managers ask for by RDS.
func rdsNames(t *testing.T, ls map[string]*listener.Listener) map[string]bool {
	out := map[string]bool{}
	for _, l := range ls {
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			for _, f := range fc.GetFilters() {
				conn := &hcm.HttpConnectionManager{}
				if f.GetName() != hcmName || f.GetTypedConfig().UnmarshalTo(conn) != nil {
					continue
				}
				if n := conn.GetRds().GetRouteConfigName(); n != "" {
					out[n] = true
				}
			}
		}
	}
	return out
}

// patchInlineRoutes applies the inbound route patches to the route
// configurations inline in virtualInbound's connection managers, which
// istiod patches when it builds them, before the listener's patches.
func patchInlineRoutes(t *testing.T, s *Set, l *listener.Listener) {
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetName() != hcmName || f.GetTypedConfig() == nil {
				continue
			}
			conn := &hcm.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(conn); err != nil {
				t.Fatal(err)
			}
			rc := conn.GetRouteConfig()
			if rc == nil {
				continue
			}
			if _, fs := s.PatchRouteConfiguration(Inbound, rc, nil); len(fs) > 0 {
				t.Errorf("inline route: %v", fs)
			}
			a, err := anypb.New(conn)
			if err != nil {
				t.Fatal(err)
			}
			f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: a}
		}
	}
}

// checkCase applies the filters of case name to istiod's output for
// case plain and compares with istiod's output for name, proxy by proxy;
// it returns how many resources the filters changed, so that a case that
// patches nothing cannot pass, and how many the prefilters ruled out.
func checkCase(t *testing.T, name, plain string) (changed, prefiltered int) {
	filters := readFilters(t, name)
	for _, p := range readProxies(t, name) {
		t.Run(p.Name, func(t *testing.T) {
			want := readDump(t, filepath.Join(caseDir, name, "istiod", p.Name+".json"))
			base := readDump(t, filepath.Join(caseDir, plain, "istiod", p.Name+".json"))
			got := applyToDump(t, proxySet(t, filters, p), base, p)
			prefiltered += got.prefiltered
			for _, kind := range []struct {
				what      string
				got, want map[string]proto.Message
				base      map[string]proto.Message
			}{
				{"cluster", msgs(got.clusters), msgs(want.clusters), msgs(base.clusters)},
				{"listener", msgs(got.listeners), msgs(want.listeners), msgs(base.listeners)},
				{"route", msgs(got.routes), msgs(want.routes), msgs(base.routes)},
			} {
				if g, w := names(kind.got), names(kind.want); g != w {
					t.Errorf("%ss %s, istiod's %s", kind.what, g, w)
				}
				for n, w := range kind.want {
					if g, ok := kind.got[n]; ok {
						compare(t, kind.what+" "+n, g, w)
					}
					if b, ok := kind.base[n]; !ok || !proto.Equal(b, w) {
						t.Logf("changed: %s %s", kind.what, n)
						changed++
					}
				}
			}
		})
	}
	return changed, prefiltered
}

func msgs[M proto.Message](m map[string]M) map[string]proto.Message {
	out := make(map[string]proto.Message, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func names(m map[string]proto.Message) string {
	var ns []string
	for k := range m {
		ns = append(ns, k)
	}
	sort.Strings(ns)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d %v", len(ns), ns)
	return b.String()
}

// TestBasicMatchesIstiod: case envoyfilter-basic (HTTP_FILTER
// INSERT_BEFORE across priorities and namespaces, CLUSTER MERGE and ADD,
// VIRTUAL_HOST MERGE, NETWORK_FILTER MERGE; a selected and an unselected
// sidecar).
func TestBasicMatchesIstiod(t *testing.T) {
	n, pre := checkCase(t, "envoyfilter-basic", "envoyfilter-basic-plain")
	t.Logf("%d resources changed, %d prefiltered out", n, pre)
	if n < 3 {
		t.Errorf("the filters changed %d resources of istiod's output, want at least 3", n)
	}
}

// TestOpsMatchesIstiod: case envoyfilter-ops, every applyTo and operation
// istiod applies to generated resources and every match field, on a
// sidecar and a router, with EnvoyFilters taken from public examples (Lua,
// local and global rate limit, header-to-metadata, TCP keepalive and
// connection limits, listener filter inserts, route timeouts and retries,
// network filter REPLACE, filter REMOVE) and patches whose proxy match
// excludes the proxy.
func TestOpsMatchesIstiod(t *testing.T) {
	n, pre := checkCase(t, "envoyfilter-ops", "envoyfilter-ops-plain")
	t.Logf("%d resources changed, %d prefiltered out", n, pre)
	if pre == 0 {
		t.Error("the prefilters ruled out no resource: every key would carry the patches")
	}
	if n < 17 {
		t.Errorf("the filters changed %d resources of istiod's output, want at least 17", n)
	}
}
