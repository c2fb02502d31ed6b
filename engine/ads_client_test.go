package engine_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// What the push tests share: an engine behind a real xDS server on
// 127.0.0.1 (startMeshServer, startConfigServer), the mesh a mesh config
// YAML gives (meshOf), config applied as files (applyFile, deleteFile) and
// a real ADS client (meshClient) that counts the responses of each type.

// startMeshServer runs an engine on w with mesh (nil: istiod's default
// mesh) behind a real xDS server on 127.0.0.1, stopped when the test ends,
// and returns it and the server's address.
func startMeshServer(t *testing.T, w *index.Writer, mesh *encode.Mesh) (*engine.Engine, string) {
	t.Helper()
	if mesh == nil {
		mesh = encode.DefaultMesh()
	}
	eng := engine.New(w, engine.Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 50 * time.Millisecond, Mesh: mesh})
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); eng.Run(runCtx) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(e2eBackend{eng}, serve.XDSOptions{}).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); stop(); wg.Wait() })
	return eng, lis.Addr().String()
}

// startConfigServer runs startMeshServer on the manifests config (as file
// config.yaml) with the mesh meshYAML gives; it returns the config's mesh,
// to change, and the server's address.
func startConfigServer(t *testing.T, meshYAML, config string) (*scenario.Mesh, string) {
	t.Helper()
	sm := scenario.NewMesh()
	applyFile(t, sm, "config.yaml", config)
	_, addr := startMeshServer(t, sm.W, meshOf(t, meshYAML))
	return sm, addr
}

// putService adds to w the Kubernetes Service name of namespace shop
// (address 10.96.0.30) with one port; edit, when set, changes it first.
func putService(w *index.Writer, name, portName string, port uint32, proto index.Protocol, edit func(*index.Service)) {
	sy := w.Symbols()
	svc := index.Service{Key: index.ServiceKey{Host: sy.Intern(name + ".shop.svc.cluster.local"), Namespace: sy.Intern("shop")},
		Name: sy.Intern(name), Origin: index.OriginKubernetes,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.96.0.30/32")},
		Ports:     []index.Port{{Name: sy.Intern(portName), Number: port, Protocol: proto}}}
	if edit != nil {
		edit(&svc)
	}
	var b index.Batch
	b.PutService(svc)
	w.Apply(&b)
}

// meshOf is the mesh MeshSettings makes of a mesh config (ConfigMap
// istio's YAML).
func meshOf(t *testing.T, y string) *encode.Mesh {
	t.Helper()
	cfg, err := inject.ParseMesh([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// applyFile applies manifests y to sm as file name (replacing what that
// file held).
func applyFile(t *testing.T, sm *scenario.Mesh, name, y string) {
	t.Helper()
	if err := sm.Apply(name, []byte(y)); err != nil {
		t.Fatal(err)
	}
}

// deleteFile deletes from sm what file name held.
func deleteFile(t *testing.T, sm *scenario.Mesh, name string) {
	t.Helper()
	if err := sm.Delete(name); err != nil {
		t.Fatal(err)
	}
}

// meshClient is a real ADS client (SotW or Delta) for one proxy: it
// subscribes to CDS and LDS (wildcard), and to other types as asked
// (subscribe), ACKs everything and keeps each type's response count and
// last resources.
type meshClient struct {
	mu      sync.Mutex
	counts  map[string]int    // guarded by mu
	last    map[string][]byte // guarded by mu: the last response's resources, concatenated (names are inside; matched by substring)
	changed chan struct{}
	sotw    discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	delta   discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node    *corev3.Node
	// subscribed are the names asked for, by type (SotW ACKs repeat them);
	// guarded by mu.
	subscribed map[string][]string
}

// newMeshClient is a SotW client for the sidecar or router id of
// namespace ns, without labels.
func newMeshClient(t *testing.T, ctx context.Context, addr, id, ns string) *meshClient {
	t.Helper()
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "ISTIO_VERSION": "1.31.0", "INSTANCE_IPS": strings.Split(id, "~")[1]})
	return newADSClient(t, ctx, addr, &corev3.Node{Id: id, Metadata: md}, false)
}

// newADSClient connects node to the xDS server at addr, over Delta or
// SotW, until ctx ends or the test does.
func newADSClient(t *testing.T, ctx context.Context, addr string, node *corev3.Node, delta bool) *meshClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	c := &meshClient{counts: map[string]int{}, last: map[string][]byte{}, changed: make(chan struct{}, 1), node: node}
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	record := func(typ string, res [][]byte) {
		c.mu.Lock()
		c.counts[typ]++
		var all []byte
		for _, r := range res {
			all = append(all, r...)
		}
		c.last[typ] = all
		c.mu.Unlock()
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	if delta {
		if c.delta, err = ads.DeltaAggregatedResources(ctx); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				r, err := c.delta.Recv()
				if err != nil {
					return
				}
				var res [][]byte
				for _, x := range r.Resources {
					res = append(res, x.GetResource().GetValue())
				}
				record(r.TypeUrl, res)
				_ = c.delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
			}
		}()
	} else {
		if c.sotw, err = ads.StreamAggregatedResources(ctx); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				r, err := c.sotw.Recv()
				if err != nil {
					return
				}
				var res [][]byte
				for _, x := range r.Resources {
					res = append(res, x.Value)
				}
				record(r.TypeUrl, res)
				c.mu.Lock()
				names := c.subscribed[r.TypeUrl]
				c.mu.Unlock()
				_ = c.sotw.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: names})
			}
		}()
	}
	c.subscribe(t, engine.TypeCluster)
	c.subscribe(t, engine.TypeListener)
	return c
}

// subscribe asks for typ (names: none is wildcard); the first request
// carries the node.
func (c *meshClient) subscribe(t *testing.T, typ string, names ...string) {
	t.Helper()
	c.mu.Lock()
	if c.subscribed == nil {
		c.subscribed = map[string][]string{}
	}
	c.subscribed[typ] = names
	first := len(c.subscribed) == 1
	c.mu.Unlock()
	var err error
	if c.delta != nil {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: names}
		if first {
			req.Node = c.node
		}
		err = c.delta.Send(req)
	} else {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names}
		if first {
			req.Node = c.node
		}
		err = c.sotw.Send(req)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (c *meshClient) count(typ string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[typ]
}

// has reports whether the last response of typ holds s.
func (c *meshClient) has(typ, s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Contains(string(c.last[typ]), s)
}

// waitFor waits until cond holds, failing the test at ctx's deadline.
func (c *meshClient) waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-c.changed:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		}
	}
}
