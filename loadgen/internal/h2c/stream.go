package h2c

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Config configures a stream's connection.
type Config struct {
	// Window is the receive window advertised for the stream and the
	// connection (Envoy's default is 256 MiB). 0 means 256 MiB.
	Window uint32
	// Dial opens the TCP connection; nil uses a net.Dialer.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// UserAgent is sent in the request headers.
	UserAgent string
}

const (
	defaultWindow = 256 << 20
	// readBufferSize is the socket read buffer of a connection: a small
	// push (a frame header and an assignment) arrives in one read, and a
	// large frame's payload bypasses it. Small, since a load test holds
	// thousands of connections.
	readBufferSize = 8 << 10
	streamID       = 1 // the one stream of a connection
	// maxMessage is the largest message accepted, as grpc-go's
	// MaxCallRecvMsgSize(math.MaxInt32) that loadgen sets.
	maxMessage = 1<<31 - 1
	// maxPrealloc bounds the buffer sized from a message's announced
	// length before its bytes arrive; beyond it the buffer doubles.
	maxPrealloc = 64 << 20
)

// Stream is one gRPC bidirectional stream on its own HTTP/2 connection.
// It implements grpc.ClientStream.
type Stream struct {
	ctx   context.Context
	conn  net.Conn
	stop  func() bool // stops the context watch
	codec encoding.CodecV2

	// Read side: the caller's goroutine only.
	br       *bufio.Reader
	hdec     *hpack.Decoder
	fields   []hpack.HeaderField // the header block being decoded
	block    []byte              // header block fragments until END_HEADERS
	blockEnd bool                // the block's HEADERS frame had END_STREAM
	inBlock  bool                // a HEADERS frame without END_HEADERS was read
	gotHdrs  bool                // response headers seen
	in       []byte              // received message bytes; in[off:] not yet delivered
	off      int
	scratch  []byte // payload of a non-DATA frame
	recvErr  error  // terminal: io.EOF on a clean end, else a status error
	unacked  uint32 // DATA bytes received since the last window update
	window   uint32 // the receive window advertised

	// Send windows and the peer's frame limit: changed by frames the
	// read side processes, used by SendMsg, on the caller's goroutine.
	sendConn   int64
	sendStream int64
	peerInit   int64 // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame   int

	// Write side: serialized, CloseSend may come from another goroutine.
	wmu       sync.Mutex
	wbuf      []byte
	henc      *hpack.Encoder
	hbuf      writerBuf
	sendDone  bool // END_STREAM sent
	writeFail error
}

// Open dials addr and opens a stream for method (a full gRPC method name,
// "/pkg.Service/Method"). Messages are marshaled and unmarshaled with
// codec; a received message's bytes are valid during Unmarshal only.
// Cancelling ctx closes the connection and fails the stream.
func Open(ctx context.Context, addr, method string, codec encoding.CodecV2, cfg Config) (*Stream, error) {
	dial := cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	conn, err := dial(ctx, addr)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "h2c: dial %s: %v", addr, err)
	}
	window := cfg.Window
	if window == 0 {
		window = defaultWindow
	}
	s := &Stream{
		ctx:        ctx,
		conn:       conn,
		codec:      codec,
		br:         bufio.NewReaderSize(conn, readBufferSize),
		window:     window,
		sendConn:   initialWindow,
		sendStream: initialWindow,
		peerInit:   initialWindow,
		maxFrame:   minMaxFrameSize,
	}
	s.hdec = hpack.NewDecoder(4096, func(f hpack.HeaderField) { s.fields = append(s.fields, f) })
	s.henc = hpack.NewEncoder(&s.hbuf)
	s.stop = context.AfterFunc(ctx, func() { _ = conn.Close() })

	b := append(s.wbuf[:0], clientPreface...)
	b = appendSettings(b, settingEnablePush, 0, settingInitialWindowSize, window)
	if window > initialWindow {
		b = appendWindowUpdate(b, 0, window-initialWindow)
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "pilotfish-loadgen-h2c"
	}
	s.hbuf.b = s.hbuf.b[:0]
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: addr},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "user-agent", Value: ua},
	} {
		_ = s.henc.WriteField(f)
	}
	b = appendHeaders(b, streamID, s.hbuf.b, s.maxFrame)
	s.wbuf = b
	if _, err := conn.Write(b); err != nil {
		s.close()
		return nil, s.connError(err)
	}
	return s, nil
}

// Context returns the stream's context.
func (s *Stream) Context() context.Context { return s.ctx }

// Header returns no metadata: loadgen reads none.
func (s *Stream) Header() (metadata.MD, error) { return nil, nil }

// Trailer returns no metadata.
func (s *Stream) Trailer() metadata.MD { return nil }

// SendMsg marshals m with the stream's codec and writes it, waiting for
// flow-control window if the peer has not granted enough (reading frames
// meanwhile: call it from the goroutine that calls RecvMsg).
func (s *Stream) SendMsg(m any) error {
	data, err := s.codec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "h2c: marshal: %v", err)
	}
	defer data.Free()
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(data.Len()))
	r := messageReader{prefix: prefix[:], data: data}
	for r.left() > 0 {
		if s.recvErr != nil && s.recvErr != io.EOF {
			return s.recvErr
		}
		avail := min(s.sendConn, s.sendStream)
		if avail <= 0 {
			if err := s.readFrame(); err != nil {
				return err
			}
			continue
		}
		if err := s.writeData(&r, int(min(avail, int64(r.left())))); err != nil {
			return err
		}
	}
	return nil
}

// writeData writes n bytes of r as DATA frames, in one write.
func (s *Stream) writeData(r *messageReader, n int) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.writeFail != nil {
		return s.writeFail
	}
	if s.sendDone {
		return status.Error(codes.Internal, "h2c: SendMsg after CloseSend")
	}
	b := s.wbuf[:0]
	if need := n + (n/s.maxFrame+1)*frameHeaderLen; cap(b) < need {
		putBuf(b)
		b = getBuf(need)[:0]
	}
	for n > 0 {
		k := min(n, s.maxFrame)
		b = appendFrameHeader(b, k, frameData, 0, streamID)
		b = r.appendTo(b, k)
		n -= k
		s.sendConn -= int64(k)
		s.sendStream -= int64(k)
	}
	s.wbuf = keepSmall(b)
	if _, err := s.conn.Write(b); err != nil {
		s.writeFail = s.connError(err)
		return s.writeFail
	}
	return nil
}

// CloseSend half-closes the stream. It may be called from any goroutine.
func (s *Stream) CloseSend() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.sendDone || s.writeFail != nil {
		return nil
	}
	s.sendDone = true
	var b [frameHeaderLen]byte
	if _, err := s.conn.Write(appendFrameHeader(b[:0], 0, frameData, flagEndStream, streamID)); err != nil {
		s.writeFail = s.connError(err)
	}
	return nil
}

// RecvMsg reads the next message into m. It returns io.EOF when the server
// ended the stream with status OK, else the stream's status error.
func (s *Stream) RecvMsg(m any) error {
	for {
		msg, ok, err := s.nextMessage()
		if err != nil {
			return s.fail(err)
		}
		if ok {
			err := s.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, m)
			s.release()
			if err != nil {
				return status.Errorf(codes.Internal, "h2c: unmarshal: %v", err)
			}
			return nil
		}
		if s.recvErr != nil {
			return s.recvErr
		}
		if err := s.readFrame(); err != nil {
			return err
		}
	}
}

// nextMessage returns the next complete message in s.in.
func (s *Stream) nextMessage() ([]byte, bool, error) {
	b := s.in[s.off:]
	if len(b) < 5 {
		return nil, false, nil
	}
	if b[0] != 0 {
		return nil, false, status.Error(codes.Internal, "h2c: compressed message, but no compression was negotiated")
	}
	n := int(binary.BigEndian.Uint32(b[1:5]))
	if n > maxMessage {
		return nil, false, status.Errorf(codes.ResourceExhausted, "h2c: message of %d bytes exceeds the %d limit", n, maxMessage)
	}
	if len(b) < 5+n {
		return nil, false, nil
	}
	s.off += 5 + n
	return b[5 : 5+n], true, nil
}

// release drops delivered bytes; a large buffer goes back to the pool
// once empty, so that an idle stream holds little.
func (s *Stream) release() {
	if s.off < len(s.in) {
		return
	}
	s.off = 0
	if cap(s.in) > keptBuffer {
		putBuf(s.in)
		s.in = nil
		return
	}
	s.in = s.in[:0]
}

// fail records the stream's terminal error and closes the connection.
func (s *Stream) fail(err error) error {
	if s.recvErr == nil {
		s.recvErr = err
	}
	if s.recvErr != io.EOF {
		s.close()
	}
	return s.recvErr
}

// close stops the context watch and closes the connection.
func (s *Stream) close() {
	s.stop()
	_ = s.conn.Close()
}

// connError maps a connection error to a status error: the context's, if
// it ended the connection.
func (s *Stream) connError(err error) error {
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return status.FromContextError(ctxErr).Err()
	}
	if errors.Is(err, io.EOF) {
		return status.Error(codes.Unavailable, "h2c: connection closed by the server")
	}
	return status.Errorf(codes.Unavailable, "h2c: %v", err)
}

// protocolError fails the stream for a peer's protocol violation.
func (s *Stream) protocolError(format string, args ...any) error {
	return s.fail(status.Errorf(codes.Internal, "h2c: protocol error: "+format, args...))
}

var errNotHTTP2 = fmt.Errorf("h2c: the server did not answer with HTTP/2")
