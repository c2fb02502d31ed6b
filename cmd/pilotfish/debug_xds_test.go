package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// Helpers of the debug, metrics and proxy-status tests: pilotfish serve
// in-process, and raw ADS clients that ACK, leave unacknowledged or NACK
// on purpose.

// startServeAddrs runs `pilotfish serve` in-process on dir and returns its
// addresses.
func startServeAddrs(t *testing.T, dir string) started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{configDir: dir, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 10, resync: 200 * time.Millisecond, shutdownGrace: time.Second}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve shutdown: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("serve did not shut down")
		}
	})
	// As a kubelet would, wait for readiness: until then xDS streams are
	// held (TestXDSStreamHeldUntilReady).
	eventually(t, "serve ready", func() string {
		if code, b := get(t, "http://"+s.httpAddr.String()+"/ready"); code != http.StatusOK {
			return fmt.Sprintf("/ready: %d %s", code, b)
		}
		return ""
	})
	return s
}

// adsClient is a raw SotW ADS client.
type adsClient struct {
	t      *testing.T
	node   *corev3.Node
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	resps  chan *discoveryv3.DiscoveryResponse
	cancel context.CancelFunc

	mu      sync.Mutex          // serializes sends: the receiver ACKs too
	autoAck bool                // guarded by mu; ACK every later response
	names   map[string][]string // guarded by mu; subscriptions, for ACKs
	got     map[string]int      // guarded by mu; responses received by type URL
}

// received returns how many responses of typeURL arrived so far.
func (c *adsClient) received(typeURL string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[typeURL]
}

// newADSClient connects a sidecar POD.NS at ip, with istio-agent's
// metadata.
func newADSClient(t *testing.T, addr, pod, ns, ip string) *adsClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = cc.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, err := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.28.0",
		"INSTANCE_IPS": ip, "LABELS": map[string]any{"app": pod}})
	if err != nil {
		t.Fatal(err)
	}
	c := &adsClient{t: t, node: &corev3.Node{Id: "sidecar~" + ip + "~" + pod + "." + ns + "~" + ns + ".svc.cluster.local", Metadata: md},
		stream: stream, resps: make(chan *discoveryv3.DiscoveryResponse, 16), cancel: cancel}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				close(c.resps)
				return
			}
			c.mu.Lock()
			if c.got == nil {
				c.got = map[string]int{}
			}
			c.got[r.GetTypeUrl()]++
			if c.autoAck {
				_ = c.stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(),
					ResponseNonce: r.GetNonce(), ResourceNames: c.names[r.GetTypeUrl()]})
			}
			c.mu.Unlock()
			c.resps <- r
		}
	}()
	return c
}

// ackAll makes the client ACK every response from now on, as a healthy
// proxy does, whatever pushes the server decides to make.
func (c *adsClient) ackAll() {
	c.mu.Lock()
	c.autoAck = true
	c.mu.Unlock()
}

func (c *adsClient) send(r *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node != nil {
		r.Node, c.node = c.node, nil
	}
	if c.names == nil {
		c.names = map[string][]string{}
	}
	c.names[r.GetTypeUrl()] = r.GetResourceNames()
	if err := c.stream.Send(r); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// request subscribes to typeURL and returns the first response of that
// type.
func (c *adsClient) request(typeURL string, names ...string) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names})
	return c.recv(typeURL)
}

// recv returns the next response of typeURL, skipping others.
func (c *adsClient) recv(typeURL string) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case r, ok := <-c.resps:
			if !ok {
				c.t.Fatal("stream ended")
			}
			if r.GetTypeUrl() == typeURL {
				return r
			}
		case <-deadline:
			c.t.Fatalf("no %s response", typeURL)
		}
	}
}

func (c *adsClient) ack(r *discoveryv3.DiscoveryResponse, names ...string) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(), ResourceNames: names})
}

func (c *adsClient) nack(r *discoveryv3.DiscoveryResponse, msg string) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: msg}})
}

// debugMesh writes the reviews service (serve_test.go's svcYAML) and
// returns the config dir.
func debugMesh(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte(svcYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
