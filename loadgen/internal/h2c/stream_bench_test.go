package h2c

import (
	"context"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkRoundTrip: one message out and its echo back on one stream,
// the shape of a push and its ACK, with grpc-go's client transport and
// with this package's, against the same in-process grpc-go server. The
// difference between the two is the client's cost per push.
func BenchmarkRoundTrip(b *testing.B) {
	// Fixed windows, as pilotfish's server has: no BDP pings to answer.
	addr, _ := startServer(&testing.T{}, echo, grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(1<<20))
	msg := message(400)
	b.Run("client=grpc-go", func(b *testing.B) {
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(defaultWindow), grpc.WithInitialConnWindowSize(defaultWindow))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		cs, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, echoMethod, grpc.ForceCodecV2(bytesCodec{}))
		if err != nil {
			b.Fatal(err)
		}
		roundTrips(b, cs, msg)
	})
	b.Run("client=h2c", func(b *testing.B) {
		s, err := Open(context.Background(), addr, echoMethod, bytesCodec{}, Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.close()
		roundTrips(b, s, msg)
	})
}

func roundTrips(b *testing.B, cs grpc.ClientStream, msg []byte) {
	b.ReportAllocs()
	var in []byte
	before := processCPU()
	for b.Loop() {
		if err := cs.SendMsg(&msg); err != nil {
			b.Fatal(err)
		}
		if err := cs.RecvMsg(&in); err != nil {
			b.Fatal(err)
		}
	}
	// Process CPU (server and client, user and system), which a loaded
	// machine inflates far less than wall time.
	b.ReportMetric(float64(processCPU()-before)/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
