package h2c

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// serverBytes is a well-formed server side of a stream: SETTINGS, the
// response headers, two messages (one split over two frames), a PING and
// the trailers.
func serverBytes() []byte {
	var hb writerBuf
	enc := hpack.NewEncoder(&hb)
	block := func(fields ...string) []byte {
		hb.b = nil
		for i := 0; i+1 < len(fields); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return hb.b
	}
	msg := func(p []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(p))), p...)
	}
	var b []byte
	b = appendSettings(b, settingInitialWindowSize, 1<<20, settingMaxFrameSize, 1<<14)
	b = appendHeaders(b, streamID, block(":status", "200", "content-type", "application/grpc"), minMaxFrameSize)
	one := msg([]byte("first message"))
	b = append(appendFrameHeader(b, len(one), frameData, 0, streamID), one...)
	two := msg(bytes.Repeat([]byte("x"), 300))
	b = append(appendFrameHeader(b, 100, frameData, 0, streamID), two[:100]...)
	b = append(appendFrameHeader(b, 8, framePing, 0, 0), "pingpong"...)
	b = append(appendFrameHeader(b, len(two)-100, frameData, 0, streamID), two[100:]...)
	b = appendWindowUpdate(b, 0, 1000)
	trailers := block("grpc-status", "3", "grpc-message", "bad%20thing")
	return append(appendFrameHeader(b, len(trailers), frameHeaders, flagEndHeaders|flagEndStream, streamID), trailers...)
}

// FuzzServerFrames: whatever a server sends, the stream neither panics nor
// hangs: RecvMsg returns messages, then an error.
func FuzzServerFrames(f *testing.F) {
	good := serverBytes()
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, server) }()
		go func() {
			_, _ = server.Write(in)
			_ = server.Close()
		}()
		s, err := Open(context.Background(), "fuzz:1", echoMethod, bytesCodec{},
			Config{Dial: func(context.Context, string) (net.Conn, error) { return client, nil }})
		if err != nil {
			return
		}
		defer s.close()
		for range 100 {
			var m []byte
			if err := s.RecvMsg(&m); err != nil {
				return
			}
		}
	})
}

func TestServerBytesSeed(t *testing.T) {
	// The fuzz seed is a valid exchange: two messages, then the status.
	client, server := net.Pipe()
	go func() { _, _ = io.Copy(io.Discard, server) }()
	go func() { _, _ = server.Write(serverBytes()) }()
	s, err := Open(context.Background(), "seed:1", echoMethod, bytesCodec{},
		Config{Dial: func(context.Context, string) (net.Conn, error) { return client, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	var m []byte
	if err := s.RecvMsg(&m); err != nil || string(m) != "first message" {
		t.Fatalf("first: %q, %v", m, err)
	}
	if err := s.RecvMsg(&m); err != nil || len(m) != 300 {
		t.Fatalf("second (split over frames): %d bytes, %v", len(m), err)
	}
	err = s.RecvMsg(&m)
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != "bad thing" {
		t.Fatalf("trailers: %v, want InvalidArgument \"bad thing\"", err)
	}
}
