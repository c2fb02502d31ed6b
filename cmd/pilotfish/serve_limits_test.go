package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/spf13/pflag"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestLimitFlagDefaults: the connection limits issue 21 added are on by
// default, and ISTIO_GPRC_MAXSTREAMS sets the streams per connection as it
// does for istiod.
func TestLimitFlagDefaults(t *testing.T) {
	var o limitOptions
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addLimitFlags(f, &o)
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.maxConcurrentStreams != 1000 || o.handshakeTimeout != 10*time.Second ||
		o.maxNodeIDBytes != serve.DefaultMaxNodeIDBytes || o.maxNodeMetadataBytes != serve.DefaultMaxNodeMetadataBytes {
		t.Fatalf("defaults: %+v", o)
	}
	t.Setenv("ISTIO_GPRC_MAXSTREAMS", "7")
	var e limitOptions
	f = pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addLimitFlags(f, &e)
	if err := f.Parse(nil); err != nil || e.maxConcurrentStreams != 7 {
		t.Fatalf("ISTIO_GPRC_MAXSTREAMS=7: %d (%v)", e.maxConcurrentStreams, err)
	}
}

// TestLimitOptionsApplied: the gRPC server the flags configure closes a
// connection that never completes its handshake, refuses streams beyond
// the per-connection limit, and its xDS server refuses an oversized node
// id.
func TestLimitOptionsApplied(t *testing.T) {
	o := limitOptions{maxConcurrentStreams: 3, handshakeTimeout: 300 * time.Millisecond}
	eng := engine.New(index.NewWriter(), engine.Options{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(append(serve.ServerOptions(), o.grpcOptions()...)...)
	serve.NewXDSServer(engineBackend{eng}, serve.XDSOptions{Limits: o.xds()}).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()

	// A connection that sends nothing is closed by the handshake timeout.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, silent); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("a silent connection is still open after 20s, handshake timeout 300ms")
	}

	// Ten streams on one connection, opened without waiting for the
	// server's SETTINGS: seven are refused.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	w := http2.NewFramer(conn, nil)
	if err := w.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", "pilotfish"},
		{":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for id := uint32(1); id < 20; id += 2 { // no request follows: the accepted streams wait
		if err := w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := http2.NewFramer(io.Discard, conn)
	for refused := 0; refused < 7; {
		fr, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("%d streams refused, then %v", refused, err)
		}
		if rst, ok := fr.(*http2.RSTStreamFrame); ok && rst.ErrCode == http2.ErrCodeRefusedStream {
			refused++
		}
	}

	// A 5 KiB node id: InvalidArgument, with a short message.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := "sidecar~10.0.0.1~" + strings.Repeat("p", 5<<10) + ".ns~ns.svc.cluster.local"
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: id}, TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || len(s.Message()) > 1024 {
		t.Fatalf("a 5 KiB node id: %v (%d bytes of message)", s.Code(), len(s.Message()))
	}
}

// engineBackend serves the engine directly (serve.go's backend also waits
// for the config sources; this test has none).
type engineBackend struct{ e *engine.Engine }

func (b engineBackend) Connect(ctx context.Context, n *corev3.Node, peer string) (serve.Session, error) {
	c, err := b.e.Connect(ctx, n, peer)
	if err != nil {
		return nil, err
	}
	return c, nil
}
