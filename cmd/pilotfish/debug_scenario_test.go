package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/debug"
	"github.com/pilotfish-mesh/pilotfish/engine"
)

var update = flag.Bool("update", false, "rewrite golden files")

const (
	reviewsCluster = "outbound|9080||reviews.shop.svc.cluster.local"
	ratingsYAML    = `apiVersion: v1
kind: Service
metadata:
  name: ratings
  namespace: shop
spec:
  clusterIP: 10.96.0.11
  ports:
  - name: http
    port: 9080
`
)

// scenario is three proxies in known states: reviews-1.shop has CDS, LDS
// and EDS acknowledged; productpage-1.shop never acknowledged its CDS;
// ratings-1.other rejected its CDS once.
type scenario struct {
	addrs            started
	dir, base        string
	synced, stale, n *adsClient
}

func newScenario(t *testing.T) *scenario {
	t.Setenv("POD_NAME", "pilotfish-0")
	s := &scenario{dir: debugMesh(t)}
	s.addrs = startServeAddrs(t, s.dir)
	s.base = "http://" + s.addrs.httpAddr.String()
	grpcAddr := s.addrs.grpcAddr.String()

	s.synced = newADSClient(t, grpcAddr, "reviews-1", "shop", "10.244.0.5")
	// A healthy proxy ACKs every response, whatever the server pushes (the
	// initial sync may still be publishing changes).
	s.synced.ackAll()
	s.synced.request(engine.TypeCluster)
	s.synced.request(engine.TypeListener)
	s.synced.request(engine.TypeEndpoint, reviewsCluster)

	s.stale = newADSClient(t, grpcAddr, "productpage-1", "shop", "10.244.0.6")
	s.stale.request(engine.TypeCluster)

	s.n = newADSClient(t, grpcAddr, "ratings-1", "other", "10.244.0.7")
	s.n.nack(s.n.request(engine.TypeCluster), "cluster rejected by the test")

	eventually(t, "all three proxies' status settled", func() string {
		st := s.syncz(t)
		if len(st) != 3 {
			return fmt.Sprintf("%d proxies in syncz", len(st))
		}
		for _, p := range st {
			if p.ProxyID == "reviews-1.shop" && (p.EndpointAcked == "" || p.ClusterAcked != p.ClusterSent || p.ListenerAcked != p.ListenerSent || p.EndpointAcked != p.EndpointSent) {
				return "reviews-1.shop's ACKs not all seen yet"
			}
			if p.ProxyID == "ratings-1.other" && p.Resources[engine.TypeCluster].LastError == "" {
				return "ratings-1.other's NACK not seen yet"
			}
		}
		return ""
	})
	return s
}

// writeConfig adds a file to the config dir at once (a rename), so the
// watcher sees one complete change.
func (s *scenario) writeConfig(t *testing.T, name, content string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		t.Fatal(err)
	}
}

func (s *scenario) syncz(t *testing.T) []debug.SyncStatus {
	t.Helper()
	code, b := get(t, s.base+"/debug/syncz")
	if code != http.StatusOK {
		t.Fatalf("syncz: %d %s", code, b)
	}
	var out []debug.SyncStatus
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("syncz: %v: %s", err, b)
	}
	return out
}

func TestDebugSyncz(t *testing.T) {
	s := newScenario(t)
	byID := map[string]debug.SyncStatus{}
	for _, p := range s.syncz(t) {
		byID[p.ProxyID] = p
	}
	syn := byID["reviews-1.shop"]
	if syn.ClusterSent == "" || syn.ClusterAcked != syn.ClusterSent || syn.ListenerSent == "" || syn.ListenerAcked != syn.ListenerSent ||
		syn.EndpointAcked != syn.EndpointSent || syn.RouteSent != "" || syn.ClusterID != "Kubernetes" || syn.IstioVersion != "1.28.0" || syn.ProxyType != "sidecar" {
		t.Errorf("reviews-1.shop: %+v", syn)
	}
	if r := syn.Resources[engine.TypeCluster]; r.Status != "SYNCED" || r.SentVersion == "" || r.AckedVersion != r.SentVersion || r.SentTime.IsZero() {
		t.Errorf("reviews-1.shop CDS: %+v", r)
	}
	st := byID["productpage-1.shop"]
	if st.ClusterSent == "" || st.ClusterAcked != "" || st.Resources[engine.TypeCluster].Status != "STALE" {
		t.Errorf("productpage-1.shop: %+v", st)
	}
	n := byID["ratings-1.other"]
	if r := n.Resources[engine.TypeCluster]; r.Status != "ERROR" || r.LastError != "cluster rejected by the test" || r.NackedVersion == "" || n.ClusterAcked != "" {
		t.Errorf("ratings-1.other: %+v", n)
	}

	// The /debug index lists every endpoint.
	code, b := get(t, s.base+"/debug")
	var paths []string
	if err := json.Unmarshal(b, &paths); code != http.StatusOK || err != nil {
		t.Fatalf("/debug: %d %v %s", code, err, b)
	}
	for _, p := range []string{"/debug/syncz", "/debug/connections", "/debug/config_dump", "/debug/keyz", "/debug/endpointz",
		"/debug/push_status", "/debug/cachez", "/debug/registryz", "/debug/configz", "/debug/config_errors"} {
		if !slices.Contains(paths, p) {
			t.Errorf("/debug lacks %s: %v", p, paths)
		}
	}

	// ?namespace= filters as istiod's does.
	code, b = get(t, s.base+"/debug/syncz?namespace=other")
	var only []debug.SyncStatus
	if err := json.Unmarshal(b, &only); code != http.StatusOK || err != nil || len(only) != 1 || only[0].ProxyID != "ratings-1.other" {
		t.Errorf("syncz?namespace=other: %d %s", code, b)
	}

	// /debug/connections: every stream, its kind, its types and watches.
	code, b = get(t, s.base+"/debug/connections")
	var conns debug.AdsClients
	if err := json.Unmarshal(b, &conns); code != http.StatusOK || err != nil || conns.Total != 3 || len(conns.Connected) != 3 {
		t.Fatalf("connections: %d %v %s", code, err, b)
	}
	for _, c := range conns.Connected {
		if c.Stream != "sotw" || c.PeerAddress == "" || c.ConnectedAt.IsZero() || c.Metadata.Namespace == "" {
			t.Errorf("connection %+v", c)
		}
		if c.ProxyID == "reviews-1.shop" && (len(c.Types) != 3 || len(c.Watches[engine.TypeEndpoint]) != 1) {
			t.Errorf("reviews-1.shop: types %v watches %v", c.Types, c.Watches)
		}
	}
}

func TestDebugConfigDumpAndKeyz(t *testing.T) {
	s := newScenario(t)
	dump := func(query string) *adminv3.ConfigDump {
		t.Helper()
		code, b := get(t, s.base+"/debug/config_dump?"+query)
		if code != http.StatusOK {
			t.Fatalf("config_dump?%s: %d %s", query, code, b)
		}
		d := &adminv3.ConfigDump{}
		if err := protojson.Unmarshal(b, d); err != nil {
			t.Fatalf("config_dump?%s: %v", query, err)
		}
		return d
	}
	d := dump("proxyID=reviews-1.shop")
	var kinds []string
	var clusters *adminv3.ClustersConfigDump
	for _, a := range d.GetConfigs() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, strings.TrimPrefix(a.GetTypeUrl(), "type.googleapis.com/envoy.admin.v3."))
		if c, ok := m.(*adminv3.ClustersConfigDump); ok {
			clusters = c
		}
	}
	if want := "BootstrapConfigDump ClustersConfigDump ListenersConfigDump ScopedRoutesConfigDump RoutesConfigDump SecretsConfigDump EcdsConfigDump"; strings.Join(kinds, " ") != want {
		t.Errorf("config dump parts %v, want %s", kinds, want)
	}
	found := false
	for _, c := range clusters.GetDynamicActiveClusters() {
		cl := &clusterv3.Cluster{}
		if err := c.GetCluster().UnmarshalTo(cl); err != nil {
			t.Fatal(err)
		}
		found = found || cl.GetName() == reviewsCluster
		if c.GetVersionInfo() == "" || c.GetLastUpdated() == nil {
			t.Errorf("cluster %s without version or time", cl.GetName())
		}
	}
	if !found {
		t.Errorf("config dump of reviews-1.shop lacks %s", reviewsCluster)
	}
	withEDS := dump("proxyID=reviews-1.shop&include_eds")
	if withEDS.GetConfigs()[2].GetTypeUrl() != "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump" {
		t.Errorf("include_eds: third part is %s", withEDS.GetConfigs()[2].GetTypeUrl())
	}
	eds := &adminv3.EndpointsConfigDump{}
	if err := withEDS.GetConfigs()[2].UnmarshalTo(eds); err != nil || len(eds.GetDynamicEndpointConfigs()) != 1 {
		t.Errorf("include_eds: %v %v", err, eds)
	}

	for _, c := range []struct{ path, want string }{
		{"/debug/config_dump", "You must provide a proxyID"},
		{"/debug/config_dump?proxyID=nobody.nowhere", `Proxy "nobody.nowhere" not connected`},
		// Only whole names match: a substring of a connected proxy's ID is
		// not a proxy (istiod would answer for whichever came first).
		{"/debug/config_dump?proxyID=reviews", `Proxy "reviews" not connected`},
		{"/debug/config_dump?proxyID=.", `Proxy "." not connected`},
		{"/debug/keyz?proxyID=nobody.nowhere&resource=x", `Proxy "nobody.nowhere" not connected`},
		{"/debug/keyz?proxyID=reviews-1.shop", "give the resource name"},
		{"/debug/keyz?proxyID=reviews-1.shop&resource=no-such-cluster", `no resource named "no-such-cluster"`},
	} {
		code, b := get(t, s.base+c.path)
		if code/100 != 4 || !strings.Contains(string(b), c.want) {
			t.Errorf("GET %s: %d %q, want 4xx containing %q", c.path, code, b, c.want)
		}
	}

	// keyz: the cluster's key, field by field, symbols resolved.
	code, b := get(t, s.base+"/debug/keyz?proxyID=reviews-1.shop&resource="+reviewsCluster)
	var kv debug.KeyzView
	if err := json.Unmarshal(b, &kv); code != http.StatusOK || err != nil {
		t.Fatalf("keyz: %d %v %s", code, err, b)
	}
	if kv.TypeURL != engine.TypeCluster || len(kv.Keys) != 1 || kv.Keys[0].Kind != "cluster" || kv.Keys[0].Name != reviewsCluster {
		t.Fatalf("keyz: %s", b)
	}
	fields, _ := json.Marshal(kv.Keys[0].Fields)
	for _, want := range []string{`"Subset":""`, `"reviews.shop.svc.cluster.local"`, `"Port":`} {
		if !bytes.Contains(fields, []byte(want)) {
			t.Errorf("keyz fields lack %s: %s", want, fields)
		}
	}
	// The hash is the cached entry's version, so the key named is the one
	// the bytes came from.
	if _, err := strconv.ParseUint(kv.Keys[0].Hash, 16, 64); err != nil {
		t.Errorf("keyz hash %q", kv.Keys[0].Hash)
	}
	// A route configuration lists the keys of its virtual hosts.
	code, b = get(t, s.base+"/debug/keyz?proxyID=reviews-1.shop&type=rds&resource=9080")
	if err := json.Unmarshal(b, &kv); code != http.StatusOK || err != nil || len(kv.Keys) == 0 || kv.Keys[0].Kind != "virtualhost" {
		t.Errorf("keyz of route 9080: %d %s", code, b)
	}
}

func TestDebugEndpointzCachezPushStatus(t *testing.T) {
	s := newScenario(t)
	code, b := get(t, s.base+"/debug/endpointz")
	var ez map[string]map[string]debug.EndpointShards
	if err := json.Unmarshal(b, &ez); code != http.StatusOK || err != nil {
		t.Fatalf("endpointz: %d %v %s", code, err, b)
	}
	sh := ez["reviews.shop.svc.cluster.local"]["shop"]
	if len(sh.Shards) != 1 || len(sh.Shards["reviews-abc"]) != 1 || sh.Shards["reviews-abc"][0].Address != "10.244.0.5" {
		_, rb := get(t, s.base+"/debug/registryz")
		_, sb := get(t, s.base+"/debug/syncz")
		_, eb := get(t, s.base+"/debug/endpointz")
		t.Errorf("endpointz reviews: %+v\nfirst endpointz %s\nnow endpointz %s\nregistryz %s\nsyncz %s", sh, b, eb, rb, sb)
	}

	code, b = get(t, s.base+"/debug/cachez")
	var cz debug.CacheView
	if err := json.Unmarshal(b, &cz); code != http.StatusOK || err != nil {
		t.Fatalf("cachez: %d %v %s", code, err, b)
	}
	var cl debug.CacheKindView
	for _, k := range cz.Kinds {
		if k.Kind == "cluster" {
			cl = k
		}
	}
	if cl.Entries == 0 || cl.Bytes == 0 || cl.Misses == 0 || cz.Total.Entries < cl.Entries || cz.Total.Misses < cl.Misses {
		t.Errorf("cachez: %s", b)
	}

	// A config change: pushed to the three proxies. A response is counted
	// under the push last queued when it is sent, so a change that lands
	// while an earlier push is still going out shows its responses split
	// between the two; what is asserted is their sum since the change.
	pushStatus := func() debug.PushStatusView {
		_, b := get(t, s.base+"/debug/push_status")
		var ps debug.PushStatusView
		if err := json.Unmarshal(b, &ps); err != nil {
			t.Fatalf("push_status: %v: %s", err, b)
		}
		return ps
	}
	sentCDS := func(ps debug.PushStatusView) (responses, bytes int) {
		for _, p := range ps.Recent {
			responses += p.Responses["cds"]
			bytes += p.Bytes["cds"]
		}
		return responses, bytes
	}
	before := pushStatus()
	cdsBefore, bytesBefore := sentCDS(before)
	s.writeConfig(t, "ratings.yaml", ratingsYAML)
	s.synced.recv(engine.TypeCluster)
	eventually(t, "push_status shows the config push", func() string {
		ps := pushStatus()
		b, _ := json.MarshalIndent(ps, "", "  ")
		if ps.Last == nil || ps.Pushes <= before.Pushes || ps.Pushes < ps.Last.Seq || len(ps.Recent) == 0 || ps.Recent[0].Seq != ps.Last.Seq {
			return string(b)
		}
		if ps.Last.Trigger != "config" || ps.Last.Proxies != 3 || ps.Last.ConfigVersion <= configVersionOf(before) {
			return string(b)
		}
		if n, bytes := sentCDS(ps); n-cdsBefore < 3 || bytes <= bytesBefore {
			return fmt.Sprintf("%d CDS responses since the change, want 3: %s", n-cdsBefore, b)
		}
		return ""
	})
}

func configVersionOf(ps debug.PushStatusView) uint64 {
	if ps.Last == nil {
		return 0
	}
	return ps.Last.ConfigVersion
}

// normalizeTable turns proxy-status output into columns joined by " | ",
// with ages replaced, so it compares across runs.
func normalizeTable(out string) string {
	age := regexp.MustCompile(`\((\d+[smhd])+\)`)
	cols := regexp.MustCompile(`\s{2,}`)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, cols.ReplaceAllString(age.ReplaceAllString(strings.TrimSpace(l), "(AGE)"), " | "))
	}
	return strings.Join(lines, "\n") + "\n"
}

// proxy-status prints the same table from the HTTP port and over xDS, and
// it matches the golden file.
func TestProxyStatus(t *testing.T) {
	s := newScenario(t)
	run := func(o proxyStatusOptions) string {
		t.Helper()
		o.timeout, o.output = 10*time.Second, "table"
		var out bytes.Buffer
		if err := runProxyStatus(context.Background(), &o, &out); err != nil {
			t.Fatalf("proxy-status %+v: %v", o, err)
		}
		return out.String()
	}
	overHTTP := normalizeTable(run(proxyStatusOptions{httpAddr: s.addrs.httpAddr.String()}))
	overXDS := normalizeTable(run(proxyStatusOptions{xdsAddr: s.addrs.grpcAddr.String()}))
	if overHTTP != overXDS {
		t.Errorf("over HTTP:\n%s\nover xDS:\n%s", overHTTP, overXDS)
	}
	golden := filepath.Join("testdata", "proxy-status.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(overHTTP), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if overHTTP != string(want) {
		t.Errorf("proxy-status:\n%s\nwant (%s, -update rewrites):\n%s", overHTTP, golden, want)
	}
	if got := normalizeTable(run(proxyStatusOptions{httpAddr: s.addrs.httpAddr.String(), namespace: "other"})); strings.Count(got, "\n") != 2 || !strings.Contains(got, "ratings-1.other") {
		t.Errorf("proxy-status --namespace other:\n%s", got)
	}
}

// istio.io/debug/config_dump over xDS answers with the proxy's config dump
// parts as unnamed resources, as istiod does (istioctl proxy-status POD
// compares them with the proxy's own dump); an unknown proxy gets an empty
// answer.
func TestXDSDebugConfigDump(t *testing.T) {
	s := newScenario(t)
	tool := newADSClient(t, s.addrs.grpcAddr.String(), "istioctl", "istio-system", "10.244.9.9")
	tool.send(&discoveryv3.DiscoveryRequest{TypeUrl: "istio.io/debug/config_dump", ResourceNames: []string{"reviews-1.shop"}})
	r := tool.recv("istio.io/debug/config_dump")
	var kinds []string
	for _, a := range r.GetResources() {
		kinds = append(kinds, strings.TrimPrefix(a.GetTypeUrl(), "type.googleapis.com/envoy.admin.v3."))
		if c, ok := mustUnmarshal(t, a).(*adminv3.ClustersConfigDump); ok && len(c.GetDynamicActiveClusters()) == 0 {
			t.Error("config_dump over xDS: no clusters")
		}
	}
	if want := "BootstrapConfigDump ClustersConfigDump ListenersConfigDump ScopedRoutesConfigDump RoutesConfigDump SecretsConfigDump EcdsConfigDump"; strings.Join(kinds, " ") != want {
		t.Errorf("config_dump over xDS: %v, want %s", kinds, want)
	}
	if cp := debug.ControlPlaneName(r.GetControlPlane().GetIdentifier()); cp != "pilotfish-0" {
		t.Errorf("control plane %q, want pilotfish-0", cp)
	}
	tool.send(&discoveryv3.DiscoveryRequest{TypeUrl: "istio.io/debug/config_dump", ResourceNames: []string{"nobody.nowhere"}})
	if r := tool.recv("istio.io/debug/config_dump"); len(r.GetResources()) != 0 {
		t.Errorf("config_dump of an unknown proxy: %d resources", len(r.GetResources()))
	}
	// The tool's stream is not a proxy: syncz leaves it out.
	if n := len(s.syncz(t)); n != 3 {
		t.Errorf("syncz lists %d proxies, want 3", n)
	}
}

func mustUnmarshal(t *testing.T, a *anypb.Any) proto.Message {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
