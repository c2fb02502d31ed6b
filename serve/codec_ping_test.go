package serve_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// recordingConn keeps every byte the client reads from the server.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	got bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.got.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

// pings counts the PING frames (not PING ACKs) in the server's bytes.
func (c *recordingConn) pings(t *testing.T) int {
	c.mu.Lock()
	data := bytes.Clone(c.got.Bytes())
	c.mu.Unlock()
	fr := http2.NewFramer(io.Discard, bytes.NewReader(data))
	n := 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n
		}
		if err != nil {
			t.Fatalf("parsing the server's frames: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			n++
		}
	}
}

// TestServerSendsNoPingPerRequest: the server's receive windows are fixed,
// so receiving requests (every ACK) never makes it send a BDP-estimation
// PING — a write on the server and a read and a PING ACK on the proxy for
// each ACK of each push.
func TestServerSendsNoPingPerRequest(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(b, serve.XDSOptions{}).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	var rc *recordingConn
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20), // no client PINGs either
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			rc = &recordingConn{Conn: c}
			return rc, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	c := newSotWClient(t, cc, "p")
	c.request(engine.TypeCluster)
	r := c.expect(engine.TypeCluster, "c1", "c2")
	for i := range 20 {
		c.ack(r)
		b.set(t, cluster("c1", i+1), cluster("c2", i+1))
		b.push(engine.Push{Full: true})
		r = c.expect(engine.TypeCluster, "c1", "c2")
	}
	c.ack(r)
	if n := rc.pings(t); n != 0 {
		t.Errorf("the server sent %d PINGs over 21 requests", n)
	}
}
