package serve_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// Attacks on the connections: more streams than a connection may carry,
// connections that never finish their handshake or never answer, slow
// HTTP clients, and proxies that never read. The gRPC server options are
// those cmd/pilotfish sets from its flags (serve_limits.go), with
// durations scaled down so that a test takes seconds.

// rawH2 is an HTTP/2 client that does only what an attacker needs: the
// preface, SETTINGS, and gRPC requests on as many streams as it likes,
// whatever the server's SETTINGS allow. It never answers a PING.
type rawH2 struct {
	conn net.Conn
	wfr  *http2.Framer
	hbuf bytes.Buffer
	henc *hpack.Encoder
	next uint32
}

func dialRawH2(t *testing.T, addr string) *rawH2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r := &rawH2{conn: conn, wfr: http2.NewFramer(conn, nil), next: 1}
	r.henc = hpack.NewEncoder(&r.hbuf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := r.wfr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return r
}

// open starts an ADS SotW stream carrying req as its first message.
func (r *rawH2) open(req *discoveryv3.DiscoveryRequest) error {
	id := r.next
	r.next += 2
	r.hbuf.Reset()
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", "pilotfish"},
		{":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = r.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := r.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	msg, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return r.wfr.WriteData(id, false, append(frame, msg...))
}

// readAll reads the server's frames until the connection ends, counting
// refused streams; it answers nothing.
func (r *rawH2) readAll(refused *atomic.Int64) error {
	fr := http2.NewFramer(io.Discard, r.conn)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.ErrCode == http2.ErrCodeRefusedStream {
			refused.Add(1)
		}
	}
}

// TestAdversarialStreamsOnOneConnection: a client opening thousands of
// streams on one HTTP/2 connection, ignoring the server's
// MaxConcurrentStreams, gets all but that many refused; they end when it
// leaves.
func TestAdversarialStreamsOnOneConnection(t *testing.T) {
	const limit, opened = 100, 2000
	a := startAdv(t, serve.XDSOptions{}, grpc.MaxConcurrentStreams(limit))
	c := startCanary(t, a)
	before := heapAfterGC()

	r := dialRawH2(t, a.addr)
	var refused atomic.Int64
	done := make(chan error, 1)
	go func() { done <- r.readAll(&refused) }()
	for i := range opened {
		req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprintf("multiplexed-%d", i)}, TypeUrl: engine.TypeCluster}
		if err := r.open(req); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	waitFor(t, "refusals", func() bool { return refused.Load() >= opened-limit })
	waitFor(t, "the accepted streams", func() bool { return a.streams() == limit+1 })
	during := heapAfterGC()
	t.Logf("%d streams opened on one connection: %d refused, %d served", opened, refused.Load(), a.streams()-1)
	if n := a.streams(); n > limit+1 {
		t.Errorf("%d streams served on one connection, limit %d", n-1, limit)
	}
	c.change()
	_ = r.conn.Close()
	<-done
	a.waitStreams(t, 1)
	report(t, "streams on one connection", before, during, heapAfterGC(), c)
}

// TestAdversarialHalfOpenConnections: connections that send nothing, or
// part of the HTTP/2 preface, are closed by the handshake timeout; one
// that completes the preface and then never answers the server's PINGs
// is closed by keepalive.
func TestAdversarialHalfOpenConnections(t *testing.T) {
	a := startAdv(t, serve.XDSOptions{},
		grpc.ConnectionTimeout(500*time.Millisecond), // --grpc-handshake-timeout
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 500 * time.Millisecond, Timeout: 500 * time.Millisecond}))
	c := startCanary(t, a)
	before := heapAfterGC()

	const perKind = 40
	kinds := map[string]func(net.Conn) error{
		"silent": func(net.Conn) error { return nil },
		"partial preface": func(conn net.Conn) error {
			_, err := io.WriteString(conn, http2.ClientPreface[:10])
			return err
		},
		"preface, then deaf": func(conn net.Conn) error {
			if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
				return err
			}
			return http2.NewFramer(conn, nil).WriteSettings()
		},
	}
	var conns []net.Conn
	var names []string
	for name, start := range kinds {
		for range perKind {
			conn, err := net.Dial("tcp", a.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			if err := start(conn); err != nil {
				t.Fatal(err)
			}
			conns, names = append(conns, conn), append(names, name)
		}
	}
	during := heapAfterGC()
	c.change()
	// Each must be closed by the server: reading ends with EOF or a reset,
	// not with the reader's own deadline.
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := io.Copy(io.Discard, conn)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s connection %d: still open after 30s", names[i], i)
			}
		}()
	}
	wg.Wait()
	for _, conn := range conns {
		_ = conn.Close()
	}
	report(t, "half-open connections", before, during, heapAfterGC(), c)
}

// TestAdversarialNeverRead: proxies that request a large config and never
// read the response hold one response each (shared) while they are
// stalled, and are ended by the send timeout; the canary meanwhile gets
// every change.
func TestAdversarialNeverRead(t *testing.T) {
	a := startAdv(t, serve.XDSOptions{Limits: serve.Limits{SendTimeout: 2 * time.Second}})
	bigClusters(t, a.b, 3000, 0) // ~600 KB of CDS, ten flow-control windows
	c := startCanary(t, a)
	before := heapAfterGC()

	const n = 20
	for i := range n {
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(a.attacker(t,
			grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))).StreamAggregatedResources(attackCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprintf("deaf-%d", i)}, TypeUrl: engine.TypeCluster}); err != nil {
			t.Fatal(err)
		}
	}
	a.waitStreams(t, n+1)
	for gen := 1; gen <= 2; gen++ {
		bigClusters(t, a.b, 3000, gen)
		c.change() // pushes the new clusters to the stalled streams too
	}
	during := heapAfterGC()
	// The server ends them (DeadlineExceeded) without the attacker doing
	// anything.
	a.waitStreams(t, 1)
	a.leave(t)
	report(t, "never-read streams", before, during, heapAfterGC(), c)
}

// TestAdversarialSlowloris: slow HTTP clients on the monitoring port are
// cut off by the header and idle timeouts, oversized headers are refused,
// and /ready answers throughout.
func TestAdversarialSlowloris(t *testing.T) {
	a := startAdv(t, serve.XDSOptions{})
	c := startCanary(t, a)
	hs := serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry()})
	serve.SetHTTPTimeouts(hs, 500*time.Millisecond, time.Second, time.Second) // 10s, 30s and 2m as served
	base, addr := startHTTP(t, hs)
	before := heapAfterGC()

	const slow = 60
	var conns []net.Conn
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range slow {
		conn, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		conns = append(conns, conn)
		wg.Add(1)
		go func() { // a header byte every 50 ms, never finishing
			defer wg.Done()
			if _, err := fmt.Fprintf(conn, "GET /ready HTTP/1.1\r\nHost: pilotfish\r\nX-Slow-%d: ", i); err != nil {
				return
			}
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := conn.Write([]byte("a")); err != nil {
					return
				}
			}
		}()
	}
	// An idle keep-alive connection after one request.
	idle, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idle.Close() })
	if _, err := io.WriteString(idle, "GET /ready HTTP/1.1\r\nHost: pilotfish\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ready: %v %v", resp, err)
	}
	if code, _ := get(t, base+"/ready"); code != http.StatusOK {
		t.Fatalf("/ready answered %d during the attack", code)
	}
	// Headers beyond MaxHeaderBytes (64 KiB) are refused.
	big, err := http.NewRequest(http.MethodGet, base+"/ready", nil)
	if err != nil {
		t.Fatal(err)
	}
	big.Header.Set("X-Big", strings.Repeat("b", 256<<10))
	if resp, err := http.DefaultClient.Do(big); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("256 KiB of headers answered %d", resp.StatusCode)
		}
	}
	during := heapAfterGC()
	c.change()
	for i, conn := range append(conns, idle) {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, conn); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("slow connection %d still open after 30s", i)
		}
	}
	close(stop)
	wg.Wait()
	for _, conn := range conns {
		_ = conn.Close()
	}
	report(t, "slowloris", before, during, heapAfterGC(), c)
}
