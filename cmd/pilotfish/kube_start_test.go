package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestKubeStartHoldsProxylessClients: proxyless gRPC clients that connect
// while the API server's initial sync is still running (here held back by a
// gate in front of the API server, as a large cluster's LIST would be) see
// no failed RPC: their streams are held until the sync completes, then get
// config, and their first RPCs, issued without WaitForReady, succeed. A
// refused stream would surface in grpc-go as a listener resource error and
// fail those RPCs at once.
func TestKubeStartHoldsProxylessClients(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	m := newKubeMesh(t, c, true)
	m.route("v1")

	gate := newGatedProxy(t, c.URL)
	a := startKubeServeUnready(t, gate.kubeconfig(t, c.Kubeconfig))

	const clients = 3
	var wg sync.WaitGroup
	results := make([][]string, clients)
	for i := range clients {
		h := grpcClient(t, a.grpc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = failFastCalls(h, 5)
		}()
	}
	eventually(t, "every client's stream held until the sync", func() string {
		if got := metricSample(t, a.http, "pilotfish_xds_streams_waiting_for_sync", ""); got != clients {
			return fmt.Sprintf("pilotfish_xds_streams_waiting_for_sync = %v, want %d", got, clients)
		}
		return ""
	})
	if code, _ := get(t, a.http+"/ready"); code == 200 {
		t.Fatal("/ready is 200 while the API server's sync is held back")
	}
	gate.release()
	wg.Wait()
	for i, r := range results {
		for j, got := range r {
			if got != "v1" {
				t.Errorf("client %d, call %d: %s; want every call answered by v1", i, j, got)
			}
		}
	}
	if got := metricSample(t, a.http, "pilotfish_xds_streams_waiting_for_sync", ""); got != 0 {
		t.Errorf("pilotfish_xds_streams_waiting_for_sync = %v after the sync, want 0", got)
	}
}

// failFastCalls makes n calls in a row, each without WaitForReady (so a
// channel in transient failure fails it at once), and names who answered
// each or the error.
func failFastCalls(h healthpb.HealthClient, n int) []string {
	out := make([]string, 0, n)
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		switch {
		case err != nil:
			out = append(out, "error: "+err.Error())
		case resp.Status == healthpb.HealthCheckResponse_SERVING:
			out = append(out, "v1")
		default:
			out = append(out, "v2")
		}
	}
	return out
}

// gatedProxy forwards TCP connections to the API server only once released:
// until then clients connect and wait (client-go's TLS handshake timeout is
// 10 s, longer than the test holds the gate).
type gatedProxy struct {
	lis  net.Listener
	open chan struct{}
	once sync.Once
}

func newGatedProxy(t *testing.T, apiURL string) *gatedProxy {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedProxy{lis: lis, open: make(chan struct{})}
	t.Cleanup(func() { g.release(); _ = lis.Close() })
	go func() {
		for {
			down, err := lis.Accept()
			if err != nil {
				return
			}
			go g.forward(down, u.Host)
		}
	}()
	return g
}

func (g *gatedProxy) release() { g.once.Do(func() { close(g.open) }) }

func (g *gatedProxy) forward(down net.Conn, upstream string) {
	defer down.Close()
	<-g.open
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
}

// kubeconfig writes a copy of the admin kubeconfig that points at the gate.
func (g *gatedProxy) kubeconfig(t *testing.T, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + g.lis.Addr().String()
	}
	out := filepath.Join(t.TempDir(), "gated.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}
