package h2c

import (
	"encoding/binary"
	"io"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// HTTP/2 (RFC 9113) constants used here.
const (
	clientPreface   = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	frameHeaderLen  = 9
	initialWindow   = 65535
	minMaxFrameSize = 16384
	maxMaxFrameSize = 1<<24 - 1

	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingEnablePush        = 0x2
	settingInitialWindowSize = 0x4
	settingMaxFrameSize      = 0x5

	errCodeCancel        = 0x8
	errCodeRefusedStream = 0x7
	errCodeEnhanceCalm   = 0xb
)

func appendFrameHeader(b []byte, length int, typ, flags byte, id uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// appendSettings appends a SETTINGS frame of (id, value) pairs.
func appendSettings(b []byte, kv ...uint32) []byte {
	b = appendFrameHeader(b, len(kv)/2*6, frameSettings, 0, 0)
	for i := 0; i+1 < len(kv); i += 2 {
		b = binary.BigEndian.AppendUint16(b, uint16(kv[i]))
		b = binary.BigEndian.AppendUint32(b, kv[i+1])
	}
	return b
}

func appendWindowUpdate(b []byte, id, inc uint32) []byte {
	b = appendFrameHeader(b, 4, frameWindowUpdate, 0, id)
	return binary.BigEndian.AppendUint32(b, inc)
}

// appendHeaders appends a header block as HEADERS and, if it does not fit
// one frame, CONTINUATION frames.
func appendHeaders(b []byte, id uint32, block []byte, maxFrame int) []byte {
	typ := byte(frameHeaders)
	for {
		n := min(len(block), maxFrame)
		var flags byte
		if n == len(block) {
			flags = flagEndHeaders
		}
		b = appendFrameHeader(b, n, typ, flags, id)
		b = append(b, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return b
		}
		typ = frameContinuation
	}
}

// writerBuf is an io.Writer appending to b (the HPACK encoder's output).
type writerBuf struct{ b []byte }

func (w *writerBuf) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readFrame reads and processes one frame.
func (s *Stream) readFrame() error {
	if s.recvErr != nil {
		return s.recvErr
	}
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(s.br, hdr[:]); err != nil {
		return s.fail(s.connError(err))
	}
	length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	typ, flags := hdr[3], hdr[4]
	id := binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff
	if string(hdr[:]) == "HTTP/1.1 " || string(hdr[:]) == "HTTP/1.0 " {
		return s.fail(status.Error(codes.Unavailable, errNotHTTP2.Error()))
	}
	if length > minMaxFrameSize { // we never raise SETTINGS_MAX_FRAME_SIZE
		return s.protocolError("frame of %d bytes exceeds %d", length, minMaxFrameSize)
	}
	if typ == frameData {
		return s.onData(id, flags, length)
	}
	if cap(s.scratch) < length {
		s.scratch = make([]byte, length)
	}
	p := s.scratch[:length]
	if _, err := io.ReadFull(s.br, p); err != nil {
		return s.fail(s.connError(err))
	}
	switch typ {
	case frameHeaders:
		if id != streamID {
			return s.protocolError("HEADERS on stream %d", id)
		}
		if flags&flagPadded != 0 {
			if len(p) < 1 || int(p[0]) >= len(p) {
				return s.protocolError("bad HEADERS padding")
			}
			p = p[1 : len(p)-int(p[0])]
		}
		if flags&flagPriority != 0 {
			if len(p) < 5 {
				return s.protocolError("short HEADERS priority")
			}
			p = p[5:]
		}
		s.block = append(s.block[:0], p...)
		s.blockEnd = flags&flagEndStream != 0
		if flags&flagEndHeaders != 0 {
			return s.onHeaderBlock()
		}
		s.inBlock = true
	case frameContinuation:
		if id != streamID || !s.inBlock {
			return s.protocolError("unexpected CONTINUATION")
		}
		s.block = append(s.block, p...)
		if flags&flagEndHeaders != 0 {
			return s.onHeaderBlock()
		}
	case frameRSTStream:
		if len(p) != 4 {
			return s.protocolError("RST_STREAM of %d bytes", len(p))
		}
		if id == streamID {
			return s.fail(resetStatus(binary.BigEndian.Uint32(p)))
		}
	case frameSettings:
		return s.onSettings(flags, p)
	case framePing:
		if flags&flagAck == 0 && len(p) == 8 {
			var b [frameHeaderLen + 8]byte
			return s.writeControl(append(appendFrameHeader(b[:0], 8, framePing, flagAck, 0), p...))
		}
	case frameGoAway:
		if len(p) < 8 {
			return s.protocolError("short GOAWAY")
		}
		if last := binary.BigEndian.Uint32(p) & 0x7fffffff; last < streamID {
			return s.fail(status.Errorf(codes.Unavailable, "h2c: the server refused the stream (GOAWAY, code %d)", binary.BigEndian.Uint32(p[4:])))
		}
		// The stream was accepted: it runs to its end.
	case frameWindowUpdate:
		if len(p) != 4 {
			return s.protocolError("WINDOW_UPDATE of %d bytes", len(p))
		}
		inc := int64(binary.BigEndian.Uint32(p) & 0x7fffffff)
		switch id {
		case 0:
			s.sendConn += inc
		case streamID:
			s.sendStream += inc
		}
	case framePushPromise:
		return s.protocolError("PUSH_PROMISE with push disabled")
	}
	return nil // PRIORITY and unknown frame types are ignored
}

// onData receives a DATA frame's payload straight into the message buffer.
func (s *Stream) onData(id uint32, flags byte, length int) error {
	if id != streamID || !s.gotHdrs {
		return s.protocolError("DATA on stream %d before response headers", id)
	}
	n, pad := length, 0
	if flags&flagPadded != 0 {
		b, err := s.br.ReadByte()
		if err != nil {
			return s.fail(s.connError(err))
		}
		pad = int(b)
		n -= 1 + pad
		if n < 0 {
			return s.protocolError("bad DATA padding")
		}
	}
	s.grow(n)
	end := len(s.in) + n
	if _, err := io.ReadFull(s.br, s.in[len(s.in):end]); err != nil {
		return s.fail(s.connError(err))
	}
	s.in = s.in[:end]
	if pad > 0 {
		if _, err := s.br.Discard(pad); err != nil {
			return s.fail(s.connError(err))
		}
	}
	if flags&flagEndStream != 0 {
		return s.fail(status.Error(codes.Internal, "h2c: the server ended the stream without trailers"))
	}
	s.unacked += uint32(length)
	if s.unacked >= s.window/2 {
		var b [2 * (frameHeaderLen + 4)]byte
		w := appendWindowUpdate(appendWindowUpdate(b[:0], 0, s.unacked), streamID, s.unacked)
		s.unacked = 0
		return s.writeControl(w)
	}
	return nil
}

// grow makes room for n more bytes in s.in, sized for the whole message
// being received when its length is known.
func (s *Stream) grow(n int) {
	if cap(s.in)-len(s.in) >= n {
		return
	}
	rest := s.in[s.off:]
	need := len(rest) + n
	if len(rest) >= 5 {
		if whole := 5 + int(binary.BigEndian.Uint32(rest[1:5])); whole <= maxPrealloc {
			need = max(need, whole)
		}
	}
	if need > maxPrealloc {
		need = max(need, 2*cap(s.in)) // unknown or huge: grow geometrically
	}
	if s.off > 0 && cap(s.in) >= need {
		s.in = s.in[:copy(s.in, rest)]
		s.off = 0
		return
	}
	b := getBuf(need)[:len(rest)]
	copy(b, rest)
	if s.in != nil {
		putBuf(s.in)
	}
	s.in, s.off = b, 0
}

// onSettings applies the peer's settings and acknowledges them.
func (s *Stream) onSettings(flags byte, p []byte) error {
	if flags&flagAck != 0 {
		return nil
	}
	if len(p)%6 != 0 {
		return s.protocolError("SETTINGS of %d bytes", len(p))
	}
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:6])
		switch binary.BigEndian.Uint16(p) {
		case settingInitialWindowSize:
			if v > 0x7fffffff {
				return s.protocolError("initial window %d", v)
			}
			s.sendStream += int64(v) - s.peerInit
			s.peerInit = int64(v)
		case settingMaxFrameSize:
			if v < minMaxFrameSize || v > maxMaxFrameSize {
				return s.protocolError("max frame size %d", v)
			}
			s.wmu.Lock()
			s.maxFrame = int(v)
			s.wmu.Unlock()
		}
	}
	var b [frameHeaderLen]byte
	return s.writeControl(appendFrameHeader(b[:0], 0, frameSettings, flagAck, 0))
}

// writeControl writes a control frame the read side owes the peer.
func (s *Stream) writeControl(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.writeFail != nil {
		return nil // the read side will see the connection fail
	}
	if _, err := s.conn.Write(b); err != nil {
		s.writeFail = s.connError(err)
	}
	return nil
}

// onHeaderBlock decodes a complete header block: the response headers,
// or the trailers (which end the stream).
func (s *Stream) onHeaderBlock() error {
	s.fields = s.fields[:0]
	if _, err := s.hdec.Write(s.block); err != nil {
		return s.protocolError("header block: %v", err)
	}
	if err := s.hdec.Close(); err != nil {
		return s.protocolError("header block: %v", err)
	}
	s.block, s.inBlock = s.block[:0], false
	var httpStatus, grpcStatus, grpcMessage, contentType string
	hasGRPCStatus := false
	for _, f := range s.fields {
		switch f.Name {
		case ":status":
			httpStatus = f.Value
		case "grpc-status":
			grpcStatus, hasGRPCStatus = f.Value, true
		case "grpc-message":
			grpcMessage = decodeGRPCMessage(f.Value)
		case "content-type":
			contentType = f.Value
		}
	}
	if !s.gotHdrs {
		s.gotHdrs = true
		if httpStatus != "200" && !hasGRPCStatus {
			return s.fail(status.Errorf(httpStatusCode(httpStatus), "h2c: unexpected HTTP status %q", httpStatus))
		}
		if !hasGRPCStatus && !strings.HasPrefix(contentType, "application/grpc") {
			return s.fail(status.Errorf(codes.Internal, "h2c: unexpected content-type %q", contentType))
		}
	}
	if !s.blockEnd {
		if hasGRPCStatus {
			return s.protocolError("grpc-status in headers that do not end the stream")
		}
		return nil
	}
	if !hasGRPCStatus {
		return s.fail(status.Error(codes.Internal, "h2c: the server ended the stream without grpc-status"))
	}
	code, err := strconv.ParseUint(grpcStatus, 10, 32)
	if err != nil {
		return s.fail(status.Errorf(codes.Internal, "h2c: malformed grpc-status %q", grpcStatus))
	}
	if code == 0 {
		return s.fail(io.EOF)
	}
	return s.fail(status.Error(codes.Code(code), grpcMessage))
}

// resetStatus maps a RST_STREAM error code to a status, as grpc-go does.
func resetStatus(code uint32) error {
	switch code {
	case errCodeCancel:
		return status.Error(codes.Canceled, "h2c: stream reset by the server (CANCEL)")
	case errCodeRefusedStream:
		return status.Error(codes.Unavailable, "h2c: stream refused by the server")
	case errCodeEnhanceCalm:
		return status.Error(codes.ResourceExhausted, "h2c: stream reset by the server (ENHANCE_YOUR_CALM)")
	}
	return status.Errorf(codes.Internal, "h2c: stream reset by the server (code %d)", code)
}

// httpStatusCode maps a non-200 HTTP status to a gRPC code (gRPC's HTTP
// to gRPC status mapping).
func httpStatusCode(s string) codes.Code {
	switch s {
	case "400":
		return codes.Internal
	case "401":
		return codes.Unauthenticated
	case "403":
		return codes.PermissionDenied
	case "404":
		return codes.Unimplemented
	case "429", "502", "503", "504":
		return codes.Unavailable
	}
	return codes.Unknown
}

// decodeGRPCMessage undoes grpc-message's percent-encoding.
func decodeGRPCMessage(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
