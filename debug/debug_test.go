package debug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/debug"
	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// The debug endpoints against the real parts they read: an index filled
// from a manifest by ingest's file source, the engine, serve's ADS server
// on a loopback gRPC port with a raw ADS client, and serve's HTTP server.
// End-to-end tests through `pilotfish serve` (istioctl included) are in
// cmd/pilotfish.

const svcYAML = `apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: shop
spec:
  clusterIP: 10.96.0.10
  selector:
    app: reviews
  ports:
  - name: http
    port: 9080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-abc
  namespace: shop
  labels:
    kubernetes.io/service-name: reviews
addressType: IPv4
ports:
- name: http
  port: 9080
endpoints:
- addresses: ["10.244.0.5"]
  conditions: {ready: true}
`

const reviewsCluster = "outbound|9080||reviews.shop.svc.cluster.local"

type backend struct{ e *engine.Engine }

func (b backend) Connect(ctx context.Context, n *corev3.Node, peer string) (serve.Session, error) {
	c, err := b.e.Connect(ctx, n, peer)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// server is the wired debug surface.
type server struct {
	http, grpc string
	pushes     *debug.PushStatus
	version    func() uint64 // the index's snapshot version
}

func start(t *testing.T) *server {
	t.Helper()
	return startWith(t, "")
}

// startWith is start with more manifests (extra) next to svcYAML.
func startWith(t *testing.T, extra string) *server {
	t.Helper()
	return startMesh(t, extra, nil)
}

// startMesh is startWith with the engine on mesh (nil: the default).
func startMesh(t *testing.T, extra string, mesh *encode.Mesh) *server {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte(svcYAML+"\n---\n"+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	w := ingest.NewIndexWriter()
	fs := ingest.NewFileSource(w, ingest.FileSourceOptions{Dir: dir, Resync: -1})
	if _, err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	eng := engine.New(w, engine.Options{DebounceAfter: time.Millisecond, DebounceMax: 10 * time.Millisecond, Mesh: mesh})
	go eng.Run(ctx)

	id := debug.ControlPlaneID("test")
	x := serve.NewXDSServer(backend{eng}, serve.XDSOptions{ControlPlaneID: id, Debug: debug.XDS(eng)})
	gs := grpc.NewServer(serve.ServerOptions()...)
	x.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	ps := debug.NewPushStatus(w.Snapshot)
	hs := serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Ready: func() bool { return true }})
	debug.Register(hs, debug.Views{Engine: eng, XDS: x, Errors: fs.Errors, Pushes: ps, ControlPlaneID: id})
	addr, err := hs.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Shutdown(context.Background()) })
	return &server{http: "http://" + addr.String(), grpc: lis.Addr().String(), pushes: ps,
		version: func() uint64 { return w.Snapshot().Version }}
}

// stream opens a SotW ADS stream; node, when set, goes on the first request.
func stream(t *testing.T, addr string) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(func() { cancel(); _ = cc.Close() })
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sidecarNode(t *testing.T, pod, ns, ip string) *corev3.Node {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.28.0",
		"INSTANCE_IPS": ip, "LABELS": map[string]any{"app": pod}})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: "sidecar~" + ip + "~" + pod + "." + ns + "~" + ns + ".svc.cluster.local", Metadata: md}
}

// connectSidecar subscribes a sidecar to CDS and ACKs the first response.
func connectSidecar(t *testing.T, addr string) {
	t.Helper()
	s := stream(t, addr)
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: sidecarNode(t, "ratings-0", "shop", "10.244.0.9"), TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func getJSON(t *testing.T, url string, v any) http.Header {
	t.Helper()
	code, h, b := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, b)
	}
	return h
}

// eventually polls check until it returns "" or 10 seconds pass.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPerProxyViews: a stream's views name the proxy as the engine parsed
// its node (found by session ID, no assertion on serve's session), show
// its sync status, and regenerate its resources and their keys.
func TestPerProxyViews(t *testing.T) {
	s := start(t)
	connectSidecar(t, s.grpc)

	var conns debug.AdsClients
	eventually(t, "connections", func() string {
		getJSON(t, s.http+"/debug/connections", &conns)
		if conns.Total != 1 || len(conns.Connected) != 1 {
			return fmt.Sprintf("%d connections, want 1", conns.Total)
		}
		return ""
	})
	c := conns.Connected[0]
	if c.ProxyID != "ratings-0.shop" || c.ConnectionID == c.ProxyID || c.Stream != "sotw" {
		t.Errorf("connection = proxy %q, id %q, stream %q; want proxy ratings-0.shop from the engine's node", c.ProxyID, c.ConnectionID, c.Stream)
	}

	var sync []debug.SyncStatus
	eventually(t, "syncz", func() string {
		h := getJSON(t, s.http+"/debug/syncz?namespace=shop", &sync)
		host, _ := os.Hostname()
		if got := h.Get(debug.InstanceHeader); got != host && os.Getenv("POD_NAME") == "" {
			return fmt.Sprintf("%s = %q, want %q", debug.InstanceHeader, got, host)
		}
		if len(sync) != 1 || sync[0].ProxyID != "ratings-0.shop" || sync[0].Resources[engine.TypeCluster].Status != "SYNCED" {
			return fmt.Sprintf("syncz = %+v, want ratings-0.shop with CDS SYNCED", sync)
		}
		return ""
	})
	if getJSON(t, s.http+"/debug/syncz?namespace=other", &sync); len(sync) != 0 {
		t.Errorf("syncz?namespace=other = %+v, want none", sync)
	}

	code, _, dump := get(t, s.http+"/debug/config_dump?proxyID=ratings-0.shop")
	if code != http.StatusOK || !strings.Contains(string(dump), reviewsCluster) || !strings.Contains(string(dump), "ClustersConfigDump") {
		t.Errorf("config_dump: %d, want 200 with %s: %.300s", code, reviewsCluster, dump)
	}
	if code, _, b := get(t, s.http+"/debug/config_dump?proxyID=nobody.shop"); code != http.StatusNotFound {
		t.Errorf("config_dump of an unknown proxy: %d %s, want 404", code, b)
	}
	if code, _, b := get(t, s.http+"/debug/config_dump"); code != http.StatusBadRequest {
		t.Errorf("config_dump without proxyID: %d %s, want 400", code, b)
	}

	var kv debug.KeyzView
	getJSON(t, s.http+"/debug/keyz?proxyID=ratings-0.shop&type=cds&resource="+reviewsCluster, &kv)
	if kv.Proxy != c.ConnectionID || kv.TypeURL != engine.TypeCluster || len(kv.Keys) == 0 || kv.Keys[0].Hash == "" {
		t.Errorf("keyz = %+v, want the cluster's key", kv)
	}
	if code, _, _ := get(t, s.http+"/debug/keyz?proxyID=ratings-0.shop&resource=no-such-cluster"); code != http.StatusNotFound {
		t.Errorf("keyz of a missing resource: %d, want 404", code)
	}
}

// TestXDSDebugTypes: istio.io/debug/syncz on an ADS stream answers one
// ClientConfig per proxy (the asking tool left out), and config_dump one
// resource per dump part, with the replica's identifier.
func TestXDSDebugTypes(t *testing.T) {
	s := start(t)
	connectSidecar(t, s.grpc)
	tool := stream(t, s.grpc)
	node := &corev3.Node{Id: "sidecar~0.0.0.0~tool.istio-system~istio-system.svc.cluster.local"}
	var resp *discoveryv3.DiscoveryResponse
	eventually(t, "debug syncz", func() string {
		if err := tool.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: serve.TypeDebugSyncz}); err != nil {
			t.Fatal(err)
		}
		r, err := tool.Recv()
		if err != nil {
			t.Fatal(err)
		}
		resp = r
		if len(r.GetResources()) != 1 {
			return fmt.Sprintf("%d ClientConfigs, want 1", len(r.GetResources()))
		}
		return ""
	})
	cc := &statusv3.ClientConfig{}
	if err := resp.GetResources()[0].UnmarshalTo(cc); err != nil {
		t.Fatal(err)
	}
	if cc.GetNode().GetId() != "ratings-0.shop" || cc.GetNode().GetMetadata().GetFields()["NAMESPACE"].GetStringValue() != "shop" {
		t.Errorf("ClientConfig node = %v, want ratings-0.shop in shop", cc.GetNode())
	}
	host, _ := os.Hostname()
	if got := debug.ControlPlaneName(resp.GetControlPlane().GetIdentifier()); got != host && os.Getenv("POD_NAME") == "" {
		t.Errorf("control plane = %q, want %q", got, host)
	}

	if err := tool.Send(&discoveryv3.DiscoveryRequest{TypeUrl: serve.TypeDebugConfigDump, ResourceNames: []string{"ratings-0.shop"}}); err != nil {
		t.Fatal(err)
	}
	r, err := tool.Recv()
	if err != nil {
		t.Fatal(err)
	}
	// bootstrap, clusters, listeners, scoped routes, routes, secrets,
	// extension configs (istiod's seven)
	if len(r.GetResources()) != 7 || !strings.Contains(string(r.GetResources()[1].GetValue()), reviewsCluster) ||
		r.GetResources()[6].GetTypeUrl() != "type.googleapis.com/envoy.admin.v3.EcdsConfigDump" {
		t.Errorf("config_dump over xDS: %d parts, want 7 with %s in clusters, EcdsConfigDump last", len(r.GetResources()), reviewsCluster)
	}
}

// TestSnapshotViews: the snapshot's views, and push_status fed through
// PushStatus's hooks and bounded to the last 16 pushes.
func TestSnapshotViews(t *testing.T) {
	s := start(t)
	var ez map[string]map[string]struct {
		Shards          map[string][]engine.EndpointView
		ServiceAccounts []string
	}
	getJSON(t, s.http+"/debug/endpointz", &ez)
	n := 0
	for _, eps := range ez["reviews.shop.svc.cluster.local"]["shop"].Shards {
		n += len(eps)
	}
	if n != 1 {
		t.Errorf("endpointz = %v, want reviews' one endpoint", ez)
	}
	var reg []engine.ServiceView
	if getJSON(t, s.http+"/debug/registryz", &reg); len(reg) != 1 || reg[0].Hostname != "reviews.shop.svc.cluster.local" {
		t.Errorf("registryz = %+v, want reviews", reg)
	}
	var errs []string
	if getJSON(t, s.http+"/debug/config_errors", &errs); len(errs) != 0 {
		t.Errorf("config_errors = %v, want none", errs)
	}
	var cz debug.CacheView
	if getJSON(t, s.http+"/debug/cachez", &cz); len(cz.Kinds) == 0 || cz.Total.Kind != "total" {
		t.Errorf("cachez = %+v, want kinds and a total", cz)
	}

	s.pushes.Debounced(5 * time.Millisecond)
	s.pushes.Queued("config", 3)
	s.pushes.Sent("cds", 100)
	s.pushes.Sent("cds", 20)
	var ps debug.PushStatusView
	getJSON(t, s.http+"/debug/push_status", &ps)
	if ps.Pushes != 1 || ps.Last == nil || ps.Last.Trigger != "config" || ps.Last.Proxies != 3 || ps.Last.Responses["cds"] != 2 ||
		ps.Last.Bytes["cds"] != 120 || ps.Last.Debounce != "5ms" || ps.Last.IndexVersion != s.version() {
		t.Errorf("push_status = %+v, want one config push to 3 proxies, 2 CDS responses of 120 bytes, debounce 5ms", ps.Last)
	}
	for range 20 {
		s.pushes.Queued("endpoint", 1)
	}
	getJSON(t, s.http+"/debug/push_status", &ps)
	if ps.Pushes != 21 || len(ps.Recent) != 16 || ps.Recent[0].Seq != 21 || ps.Recent[15].Seq != 6 {
		t.Errorf("push_status after 21 pushes: %d pushes, %d recent (seq %d..%d); want 21, the last 16",
			ps.Pushes, len(ps.Recent), ps.Recent[0].Seq, ps.Recent[len(ps.Recent)-1].Seq)
	}
}

func TestControlPlaneName(t *testing.T) {
	for _, tc := range []struct{ name, id, want string }{
		{"istiod JSON", `{"Component":"istiod","ID":"istiod-7f9","Info":{}}`, "istiod-7f9"},
		{"plain", "replica-2", "replica-2"},
		{"JSON without ID", `{"Component":"x"}`, `{"Component":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := debug.ControlPlaneName(tc.id); got != tc.want {
				t.Errorf("ControlPlaneName(%q) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
	t.Setenv("POD_NAME", "pilotfish-3")
	if got := debug.ControlPlaneName(debug.ControlPlaneID("1.0")); got != "pilotfish-3" {
		t.Errorf("round trip = %q, want pilotfish-3", got)
	}
}
