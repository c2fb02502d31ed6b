package bench

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3" // registers ClusterLoadAssignment
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3" // registers RouteConfiguration
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// xdsTypes are the types a sidecar subscribes to, in the order a control
// plane publishes an update (make before break: endpoints before the
// clusters that name them, listeners before their routes' users).
var xdsTypes = []string{engine.TypeEndpoint, engine.TypeCluster, engine.TypeListener, engine.TypeRoute}

// typeShort names a type URL in tables and errors.
func typeShort(typeURL string) string {
	switch typeURL {
	case engine.TypeCluster:
		return "cds"
	case engine.TypeEndpoint:
		return "eds"
	case engine.TypeListener:
		return "lds"
	case engine.TypeRoute:
		return "rds"
	}
	return typeURL
}

// Counts are the resources of one proxy's full config, per type, and their
// encoded size.
type Counts struct {
	Clusters  int `json:"clusters"`
	Endpoints int `json:"endpoints"` // ClusterLoadAssignments
	Listeners int `json:"listeners"`
	Routes    int `json:"routes"`
	Bytes     int `json:"bytes"`
}

func (c Counts) of(typeURL string) int {
	switch typeURL {
	case engine.TypeCluster:
		return c.Clusters
	case engine.TypeEndpoint:
		return c.Endpoints
	case engine.TypeListener:
		return c.Listeners
	case engine.TypeRoute:
		return c.Routes
	}
	return 0
}

// typeUpdate is what a go-control-plane control plane publishes for one
// type: resources added or changed, and names removed.
type typeUpdate struct {
	typeURL string
	put     map[string]types.Resource
	removed []string
}

// change is one step of a plan, applied to every server in turn.
type change struct {
	// manifest, for a config change, is what pilotfish ingests.
	manifest *ManifestFile
	// edit, for an endpoint change, is what pilotfish applies to its index.
	edit *endpointEdit
	// updates is what the baselines publish, in xdsTypes order: exactly the
	// resources pilotfish's own output changed for the representative proxy.
	updates []typeUpdate
	// counts is the full config after the change.
	counts Counts
}

// plan is the fixed sequence of changes of one workload: C config changes,
// then K endpoint changes. It is computed once, before any server starts, by
// running pilotfish's engine for one representative proxy (loadgen's proxy
// 0: every loadgen proxy is in the same class) and decoding what it
// generates, so the baselines serve exactly the resources pilotfish does.
type plan struct {
	workload *Workload
	// initial is the full config before any change: type URL → name →
	// resource.
	initial map[string]map[string]types.Resource
	counts  Counts
	changes []change
	churn   []change
}

// planOptions size a plan.
type planOptions struct {
	changes      int // config changes
	churn        int // endpoint changes
	churnTargets int // services whose endpoints churn, round robin
}

// translator runs pilotfish's engine for the representative proxy and
// tracks its current full config.
type translator struct {
	w       *index.Writer
	in      *ingester
	conn    *engine.Conn
	decoded map[string]proto.Message // Resource.Version → decoded resource
	cur     map[string][]engine.Resource
}

func newTranslator(wl *Workload) (*translator, error) {
	w := index.NewWriter()
	in := newIngester(w)
	if err := in.apply(wl.Files...); err != nil {
		return nil, err
	}
	cache := encode.NewCache()
	cache.SetVerify(false)
	e := engine.New(w, engine.Options{Cache: cache})
	conn, err := e.Connect(context.Background(), representativeNode(), "")
	if err != nil {
		return nil, fmt.Errorf("bench: representative proxy: %w", err)
	}
	return &translator{w: w, in: in, conn: conn, decoded: map[string]proto.Message{}}, nil
}

// full generates the representative proxy's full config the way Envoy
// fetches it: CDS, EDS for the EDS clusters' service names, LDS, RDS for
// the route configurations the listeners name.
func (t *translator) full() (map[string][]engine.Resource, error) {
	out := map[string][]engine.Resource{}
	gen := func(typeURL string, names []string, wildcard bool) ([]engine.Resource, error) {
		res, err := t.conn.Generate(typeURL, names, wildcard, nil)
		if err != nil {
			return nil, fmt.Errorf("bench: generating %s: %w", typeShort(typeURL), err)
		}
		out[typeURL] = res
		return res, nil
	}
	clusters, err := gen(engine.TypeCluster, nil, true)
	if err != nil {
		return nil, err
	}
	var eds []string
	for _, r := range clusters {
		m, err := t.decode(r)
		if err != nil {
			return nil, err
		}
		c := m.(*clusterv3.Cluster)
		if c.GetType() == clusterv3.Cluster_EDS {
			name := c.GetEdsClusterConfig().GetServiceName()
			if name == "" {
				name = c.GetName()
			}
			eds = append(eds, name)
		}
	}
	slices.Sort(eds)
	if _, err := gen(engine.TypeEndpoint, slices.Compact(eds), false); err != nil {
		return nil, err
	}
	listeners, err := gen(engine.TypeListener, nil, true)
	if err != nil {
		return nil, err
	}
	var rds []string
	for _, r := range listeners {
		m, err := t.decode(r)
		if err != nil {
			return nil, err
		}
		rds = append(rds, routeNames(m.(*listenerv3.Listener))...)
	}
	slices.Sort(rds)
	if _, err := gen(engine.TypeRoute, slices.Compact(rds), false); err != nil {
		return nil, err
	}
	return out, nil
}

// routeNames returns the RDS names a listener's HTTP connection managers
// reference.
func routeNames(l *listenerv3.Listener) []string {
	var out []string
	chains := l.GetFilterChains()
	if l.GetDefaultFilterChain() != nil {
		chains = append(slices.Clip(chains), l.GetDefaultFilterChain())
	}
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			tc := f.GetTypedConfig()
			if tc == nil || !tc.MessageIs((*hcmv3.HttpConnectionManager)(nil)) {
				continue
			}
			var hcm hcmv3.HttpConnectionManager
			if tc.UnmarshalTo(&hcm) != nil {
				continue
			}
			if n := hcm.GetRds().GetRouteConfigName(); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// decode returns r as its typed message, decoding each distinct version
// once.
func (t *translator) decode(r engine.Resource) (proto.Message, error) {
	key := r.Name + "\x00" + r.Version
	if m, ok := t.decoded[key]; ok && r.Version != "" {
		return m, nil
	}
	var a anypb.Any
	if err := proto.Unmarshal(r.Any, &a); err != nil {
		return nil, fmt.Errorf("bench: resource %s: %w", r.Name, err)
	}
	m, err := a.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("bench: resource %s (%s): %w", r.Name, a.GetTypeUrl(), err)
	}
	t.decoded[key] = m
	return m, nil
}

// step regenerates the full config and returns what changed since the last
// call, per type in xdsTypes order, and the new counts.
func (t *translator) step() ([]typeUpdate, Counts, error) {
	next, err := t.full()
	if err != nil {
		return nil, Counts{}, err
	}
	var ups []typeUpdate
	var counts Counts
	for _, typ := range xdsTypes {
		old := map[string]engine.Resource{}
		for _, r := range t.cur[typ] {
			old[r.Name] = r
		}
		u := typeUpdate{typeURL: typ, put: map[string]types.Resource{}}
		for _, r := range next[typ] {
			counts.Bytes += len(r.Any)
			if o, ok := old[r.Name]; ok && sameResource(o, r) {
				delete(old, r.Name)
				continue
			}
			delete(old, r.Name)
			m, err := t.decode(r)
			if err != nil {
				return nil, Counts{}, err
			}
			u.put[r.Name] = m
		}
		u.removed = slices.Sorted(maps.Keys(old))
		if len(u.put) > 0 || len(u.removed) > 0 {
			ups = append(ups, u)
		}
		n := len(next[typ])
		switch typ {
		case engine.TypeCluster:
			counts.Clusters = n
		case engine.TypeEndpoint:
			counts.Endpoints = n
		case engine.TypeListener:
			counts.Listeners = n
		case engine.TypeRoute:
			counts.Routes = n
		}
	}
	t.cur = next
	return ups, counts, nil
}

// sameResource compares bytes: pilotfish may give equal bytes a new
// version (a key input changed without changing the output), which a
// control plane diffing its output would not publish.
func sameResource(a, b engine.Resource) bool {
	return (a.Version != "" && a.Version == b.Version) || string(a.Any) == string(b.Any)
}

// newPlan computes the plan of wl.
func newPlan(wl *Workload, o planOptions) (*plan, error) {
	t, err := newTranslator(wl)
	if err != nil {
		return nil, err
	}
	ups, counts, err := t.step()
	if err != nil {
		return nil, err
	}
	p := &plan{workload: wl, initial: map[string]map[string]types.Resource{}, counts: counts}
	for _, typ := range xdsTypes {
		p.initial[typ] = map[string]types.Resource{}
	}
	for _, u := range ups {
		p.initial[u.typeURL] = u.put
	}
	if counts.Clusters == 0 || counts.Listeners == 0 {
		return nil, fmt.Errorf("%w: %s gives the representative proxy %d clusters and %d listeners", ErrWorkload, wl, counts.Clusters, counts.Listeners)
	}
	for i := 1; i <= o.changes; i++ {
		m := addedService(i)
		if err := t.in.apply(m); err != nil {
			return nil, err
		}
		ups, counts, err := t.step()
		if err != nil {
			return nil, err
		}
		if !touches(ups, engine.TypeCluster) {
			return nil, fmt.Errorf("bench: config change %d did not add a cluster", i)
		}
		p.changes = append(p.changes, change{manifest: &m, updates: ups, counts: counts})
	}
	if o.churn > 0 {
		targets, err := churnTargets(t, o.churnTargets)
		if err != nil {
			return nil, err
		}
		for i := 1; i <= o.churn; i++ {
			tg := targets[(i-1)%len(targets)]
			e := endpointEdit{Host: tg.host, Namespace: tg.namespace, Addr: tg.churned}
			if ((i-1)/len(targets))%2 == 1 {
				e.Addr = tg.original
			}
			if err := applyEndpointEdit(t.w, e); err != nil {
				return nil, err
			}
			ups, counts, err := t.step()
			if err != nil {
				return nil, err
			}
			if !touches(ups, engine.TypeEndpoint) {
				return nil, fmt.Errorf("bench: endpoint change %d (%s) changed no ClusterLoadAssignment", i, e.Host)
			}
			p.churn = append(p.churn, change{edit: &e, updates: ups, counts: counts})
		}
	}
	return p, nil
}

func touches(ups []typeUpdate, typeURL string) bool {
	for _, u := range ups {
		if u.typeURL == typeURL {
			return true
		}
	}
	return false
}

// countsAfter returns the full config's counts after the first n config
// changes.
func (p *plan) countsAfter(n int) Counts {
	if n == 0 || len(p.changes) == 0 {
		return p.counts
	}
	return p.changes[min(n, len(p.changes))-1].counts
}

// churnTarget is a service whose first endpoint churns between two
// addresses.
type churnTarget struct {
	host, namespace   string
	original, churned netip.Addr
}

// churnTargets picks up to n services of the representative proxy's EDS
// clusters that have an IP endpoint, in cluster name order.
func churnTargets(t *translator, n int) ([]churnTarget, error) {
	snap := t.w.Snapshot()
	seen := map[string]bool{}
	var out []churnTarget
	for _, r := range t.cur[engine.TypeEndpoint] {
		// outbound|PORT|SUBSET|HOST
		parts := strings.Split(r.Name, "|")
		if len(parts) != 4 || parts[0] != "outbound" || seen[parts[3]] {
			continue
		}
		host := parts[3]
		seen[host] = true
		sym, ok := snap.Symbols.Lookup(host)
		if !ok {
			continue
		}
		for _, id := range snap.ServicesByHost(sym) {
			svc := snap.ServiceByID(id)
			shard := snap.Endpoints(svc.Key)
			if shard == nil || len(shard.Groups) == 0 || len(shard.Groups[0].Endpoints) == 0 ||
				!shard.Groups[0].Endpoints[0].Addr.Is4() {
				continue
			}
			k := len(out)
			out = append(out, churnTarget{
				host: host, namespace: snap.String(svc.Key.Namespace),
				original: shard.Groups[0].Endpoints[0].Addr,
				churned:  netip.AddrFrom4([4]byte{10, 254, byte(k >> 8), byte(k)}),
			})
			break
		}
		if len(out) == n {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no service with IP endpoints for the endpoint churn", ErrWorkload)
	}
	return out, nil
}

// loadgen's proxy identity (package loadgen, node.go) with its defaults:
// proxy 0 of namespace load-0, app load-0. Every proxy of a run differs
// only in IP and pod name, which pilotfish does not classify on, so all of
// them share this proxy's config.
const (
	loadgenNamespace = "load-0"
	loadgenApp       = "load-0"
)

// representativeNode is loadgen's proxy 0.
func representativeNode() *corev3.Node {
	md, _ := structpb.NewStruct(map[string]any{
		"NAMESPACE":       loadgenNamespace,
		"LABELS":          map[string]any{"app": loadgenApp, "version": "v1"},
		"CLUSTER_ID":      "Kubernetes",
		"ISTIO_VERSION":   "1.31.0",
		"INSTANCE_IPS":    "10.10.0.1",
		"WORKLOAD_NAME":   loadgenApp,
		"NAME":            "pod-0",
		"SERVICE_ACCOUNT": "default",
		"MESH_ID":         "cluster.local",
		"OWNER":           "kubernetes://apis/apps/v1/namespaces/" + loadgenNamespace + "/deployments/" + loadgenApp,
	})
	return &corev3.Node{
		Id:             "sidecar~10.10.0.1~pod-0." + loadgenNamespace + "~" + loadgenNamespace + ".svc.cluster.local",
		Cluster:        loadgenApp + "." + loadgenNamespace,
		Metadata:       md,
		UserAgentName:  "envoy",
		ClientFeatures: []string{"envoy.lb.does_not_support_overprovisioning", "envoy.lrs.supports_send_all_clusters"},
	}
}
