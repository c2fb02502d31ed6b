package h2c

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// bytesCodec sends and receives *[]byte as is.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }

func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("bytesCodec: %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("bytesCodec: %T", v)
	}
	*b = data.Materialize()
	return nil
}

const echoMethod = "/test.Echo/Stream"

// startServer serves echoMethod on a grpc-go server whose handler is fn,
// with gRPC's default (64 KiB) windows, so that large messages need
// window updates both ways.
func startServer(t *testing.T, fn func(grpc.ServerStream) error, opts ...grpc.ServerOption) (addr string, gs *grpc.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs = grpc.NewServer(append([]grpc.ServerOption{grpc.ForceServerCodecV2(bytesCodec{})}, opts...)...)
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Stream",
			ServerStreams: true,
			ClientStreams: true,
			Handler:       func(_ any, ss grpc.ServerStream) error { return fn(ss) },
		}},
	}, struct{}{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), gs
}

// echo returns every message it receives until the client half-closes.
func echo(ss grpc.ServerStream) error {
	for {
		var b []byte
		if err := ss.RecvMsg(&b); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&b); err != nil {
			return err
		}
	}
}

func open(t *testing.T, ctx context.Context, addr, method string, cfg Config) *Stream {
	t.Helper()
	s, err := Open(ctx, addr, method, bytesCodec{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func message(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + n)
	}
	return b
}

func TestEchoAcrossFlowControl(t *testing.T) {
	addr, _ := startServer(t, echo)
	// A receive window smaller than the largest message: the client must
	// grant more as it reads, and the server (64 KiB windows) must grant
	// the client more as it reads the client's large messages.
	for _, window := range []uint32{0, 100_000} {
		t.Run(fmt.Sprintf("window=%d", window), func(t *testing.T) {
			s := open(t, context.Background(), addr, echoMethod, Config{Window: window})
			for _, n := range []int{0, 1, 100, 16384, 70_000, 3 << 20, 5} {
				out := message(n)
				if err := s.SendMsg(&out); err != nil {
					t.Fatalf("send %d bytes: %v", n, err)
				}
				var in []byte
				if err := s.RecvMsg(&in); err != nil {
					t.Fatalf("receive %d bytes: %v", n, err)
				}
				if !bytes.Equal(in, out) {
					t.Fatalf("echo of %d bytes came back as %d different bytes", n, len(in))
				}
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			var in []byte
			if err := s.RecvMsg(&in); !errors.Is(err, io.EOF) {
				t.Fatalf("after CloseSend: %v, want io.EOF (status OK)", err)
			}
		})
	}
}

func TestPipelinedMessages(t *testing.T) {
	// Many messages sent before any is read: the server's pushes queue in
	// the socket and arrive several per read, some split across frames.
	addr, _ := startServer(t, func(ss grpc.ServerStream) error {
		for i := range 200 {
			b := message(i * 97)
			if err := ss.SendMsg(&b); err != nil {
				return err
			}
		}
		return nil
	})
	s := open(t, context.Background(), addr, echoMethod, Config{})
	hello := []byte("hello")
	if err := s.SendMsg(&hello); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		var in []byte
		if err := s.RecvMsg(&in); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(in, message(i*97)) {
			t.Fatalf("message %d differs", i)
		}
	}
	var in []byte
	if err := s.RecvMsg(&in); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}

func TestStatusErrors(t *testing.T) {
	addr, _ := startServer(t, func(ss grpc.ServerStream) error {
		var b []byte
		if err := ss.RecvMsg(&b); err != nil {
			return err
		}
		return status.Error(codes.PermissionDenied, "not yours: 100% sure")
	})
	s := open(t, context.Background(), addr, echoMethod, Config{})
	b := []byte("x")
	if err := s.SendMsg(&b); err != nil {
		t.Fatal(err)
	}
	err := s.RecvMsg(&b)
	if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied || st.Message() != "not yours: 100% sure" {
		t.Fatalf("got %v, want PermissionDenied with the server's message", err)
	}

	// An unknown method is answered with trailers only.
	u := open(t, context.Background(), addr, "/test.Echo/Nope", Config{})
	if err := u.RecvMsg(&b); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v, want Unimplemented", err)
	}
}

func TestContextCancelUnblocksRecv(t *testing.T) {
	addr, _ := startServer(t, func(ss grpc.ServerStream) error {
		<-ss.Context().Done()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	s := open(t, ctx, addr, echoMethod, Config{})
	done := make(chan error, 1)
	go func() {
		var b []byte
		done <- s.RecvMsg(&b)
	}()
	cancel()
	select {
	case err := <-done:
		if status.Code(err) != codes.Canceled {
			t.Fatalf("got %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RecvMsg still blocked after the context was cancelled")
	}
}

func TestServerStopFailsStream(t *testing.T) {
	addr, gs := startServer(t, func(ss grpc.ServerStream) error {
		<-ss.Context().Done()
		return nil
	})
	s := open(t, context.Background(), addr, echoMethod, Config{})
	b := []byte("x")
	if err := s.SendMsg(&b); err != nil {
		t.Fatal(err)
	}
	gs.Stop()
	if err := s.RecvMsg(&b); status.Code(err) == codes.OK || errors.Is(err, io.EOF) {
		t.Fatalf("after the server stopped: %v, want an error status", err)
	}
}

func TestAnswersKeepalivePings(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the server's keepalive (about 3 s)")
	}
	// The server pings an idle connection every second and closes it if a
	// ping is not answered within 500 ms; it speaks after 3 s. The client
	// sits in RecvMsg meanwhile, as an idle proxy does.
	addr, _ := startServer(t, func(ss grpc.ServerStream) error {
		time.Sleep(3 * time.Second)
		b := []byte("late")
		return ss.SendMsg(&b)
	}, grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Second, Timeout: 500 * time.Millisecond}))
	s := open(t, context.Background(), addr, echoMethod, Config{})
	var in []byte
	if err := s.RecvMsg(&in); err != nil || string(in) != "late" {
		t.Fatalf("after 3 s idle: %q, %v", in, err)
	}
}

func TestIdleStreamKeepsSmallBuffers(t *testing.T) {
	addr, _ := startServer(t, echo)
	s := open(t, context.Background(), addr, echoMethod, Config{})
	out := message(1 << 20)
	if err := s.SendMsg(&out); err != nil {
		t.Fatal(err)
	}
	var in []byte
	if err := s.RecvMsg(&in); err != nil {
		t.Fatal(err)
	}
	if cap(s.in) > keptBuffer || cap(s.wbuf) > keptBuffer {
		t.Fatalf("idle stream keeps %d B to receive and %d B to send, want at most %d each", cap(s.in), cap(s.wbuf), keptBuffer)
	}
}
