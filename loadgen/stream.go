package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/loadgen/internal/h2c"
)

// stream is one ADS session of a proxy, SotW or Delta. Only the proxy's
// goroutine uses it: it sends from the goroutine that receives, as Envoy's
// main thread does.
type stream interface {
	// subscribe sends t's subscription; added and removed are the names
	// changed since the last one (Delta sends only those).
	subscribe(p *proxy, t xtype, added, removed []uint32) error
	// reply ACKs (or NACKs) response r.
	reply(p *proxy, r *response, nack bool) error
	// recv receives and decodes the next response.
	recv(in *inbound) error
	clientStream() grpc.ClientStream
}

const (
	sotwMethod  = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	deltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	nackMessage = "loadgen: simulated NACK (--nack-rate)"
)

var adsDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// open opens an ADS stream of the run's mode on conn.
func (p *proxy) open(ctx context.Context, conn *grpc.ClientConn) (stream, error) {
	method := sotwMethod
	if p.run.cfg.Mode == Delta {
		method = deltaMethod
	}
	var cs grpc.ClientStream
	var err error
	if cfg := &p.run.cfg; cfg.Transport == TransportH2C {
		cs, err = h2c.Open(ctx, h2cAddr(cfg.XDS), method, rawCodec{}, h2c.Config{Window: envoyWindow, Dial: cfg.Dialer, UserAgent: "pilotfish-loadgen"})
	} else {
		cs, err = conn.NewStream(ctx, adsDesc, method, grpc.ForceCodecV2(rawCodec{}))
	}
	if err != nil {
		return nil, err
	}
	if p.run.cfg.Mode == Delta {
		return deltaStream{cs}, nil
	}
	return sotwStream{cs}, nil
}

// h2cAddr is the host:port of an xDS address, without a gRPC target
// scheme ("dns:///host:port").
func h2cAddr(xds string) string {
	if i := strings.Index(xds, ":///"); i >= 0 {
		return xds[i+len(":///"):]
	}
	return xds
}

// session runs one stream until it fails or ctx ends.
func (p *proxy) session(ctx context.Context, conn *grpc.ClientConn) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := p.open(sctx, conn)
	if err != nil {
		if ctx.Err() == nil {
			p.run.connectErrors.Add(1)
		}
		return fmt.Errorf("proxy %d: open stream: %w", p.idx, err)
	}
	p.run.connected(p, +1)
	p.setStream(s)
	defer func() {
		p.setStream(nil)
		p.run.connected(p, -1)
		if ctx.Err() == nil && !p.run.stopping.Load() {
			p.run.streamErrors.Add(1)
		}
	}()
	if err := p.resetSession(); err != nil {
		return fmt.Errorf("proxy %d: send: %w", p.idx, err)
	}
	in := inbound{dec: &p.run.dec, delta: p.run.cfg.Mode == Delta}
	for {
		if err := s.recv(&in); err != nil {
			if in.err != nil {
				p.run.decodeErrors.Add(1)
				err = in.err
			}
			return fmt.Errorf("proxy %d: receive: %w", p.idx, err)
		}
		err := p.handle(in.resp)
		putResponse(in.resp)
		in.resp = nil
		if errors.Is(err, errStopping) {
			// The run is ending: drain until the server ends the stream,
			// so that it reads every request sent before the half-close
			// (cancelling now would reset the stream under them).
			continue
		}
		if err != nil {
			return fmt.Errorf("proxy %d: send: %w", p.idx, err)
		}
		if p.full && p.run.roleOf(p.idx) == stalled {
			// Stop reading, stream open, until the run ends.
			p.run.stalledNow.Add(1)
			<-sctx.Done()
			p.run.stalledNow.Add(-1)
			return sctx.Err()
		}
	}
}

// setStream sets the proxy's current stream (nil: none).
func (p *proxy) setStream(s stream) {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	p.stream, p.closed = s, false
	if s != nil && p.run.stopping.Load() {
		// The runner's closeSend pass may have run before this stream
		// existed.
		p.closed = true
		_ = s.clientStream().CloseSend()
	}
}

// send sends p.req, just encoded, on the current stream.
func (p *proxy) send() error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if p.closed || p.stream == nil {
		p.req.release()
		return errStopping
	}
	err := p.stream.clientStream().SendMsg(&p.req)
	p.req.release() // gRPC took its buffer unless SendMsg failed before
	return err
}

// encodedNames returns st's subscription encoded as resource_names (nil
// for a wildcard), computed once per subscription.
func (p *proxy) encodedNames(st *typeState) []byte {
	if st.wildcard || len(st.names) == 0 {
		return nil
	}
	if st.encoded == nil {
		st.encoded = p.run.syms.encodeNames(st.names)
	}
	return st.encoded
}

// closeSend half-closes the current stream, after the requests already
// sent: the server sees every ACK, then the end of the stream. Called by
// the runner when the run ends.
func (p *proxy) closeSend() {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if p.stream != nil && !p.closed {
		p.closed = true
		_ = p.stream.clientStream().CloseSend()
	}
}

var errStopping = errors.New("loadgen: stopping")

// attachNode puts the Node on the stream's first request only, as Envoy
// does with set_node_on_first_message_only.
func (p *proxy) attachNode() *corev3.Node {
	if p.nodeSent {
		return nil
	}
	p.nodeSent = true
	return p.run.cfg.node(p.idx)
}

type sotwStream struct{ cs grpc.ClientStream }

func (s sotwStream) subscribe(p *proxy, t xtype, _, _ []uint32) error {
	st := &p.st[t]
	q := sotwRequest{typeURL: typeURLs[t], version: st.version, nonce: st.nonce,
		node: p.attachNode(), names: p.encodedNames(st)}
	if err := q.encode(&p.req); err != nil {
		return err
	}
	return p.send()
}

func (s sotwStream) reply(p *proxy, r *response, nack bool) error {
	q := sotwRequest{typeURL: r.url(), nonce: r.nonce, node: p.attachNode(), nack: nack}
	if r.t == typeOther {
		q.version = string(r.version)
	} else {
		// After an ACK st.version is r's; after a NACK it is the last
		// accepted one, which is what a NACK carries.
		st := &p.st[r.t]
		q.version, q.names = st.version, p.encodedNames(st)
	}
	if err := q.encode(&p.req); err != nil {
		return err
	}
	return p.send()
}

func (s sotwStream) recv(in *inbound) error          { return s.cs.RecvMsg(in) }
func (s sotwStream) clientStream() grpc.ClientStream { return s.cs }

type deltaStream struct{ cs grpc.ClientStream }

func (s deltaStream) subscribe(p *proxy, t xtype, added, removed []uint32) error {
	q := deltaRequest{typeURL: typeURLs[t], node: p.attachNode()}
	if !p.st[t].wildcard {
		q.subscribe, q.unsubscribe = added, removed
	}
	if err := q.encode(p.run.syms, &p.req); err != nil {
		return err
	}
	return p.send()
}

func (s deltaStream) reply(p *proxy, r *response, nack bool) error {
	q := deltaRequest{typeURL: r.url(), nonce: r.nonce, node: p.attachNode(), nack: nack}
	if err := q.encode(p.run.syms, &p.req); err != nil {
		return err
	}
	return p.send()
}

func (s deltaStream) recv(in *inbound) error          { return s.cs.RecvMsg(in) }
func (s deltaStream) clientStream() grpc.ClientStream { return s.cs }

// inbound is the receive target of rawCodec: the codec decodes the message
// while gRPC still holds its buffers, so no response bytes outlive RecvMsg.
type inbound struct {
	dec   *decoder
	delta bool
	resp  *response // set by a successful decode; return it with putResponse
	err   error     // a decode error (as opposed to a transport error)
}

// rawCodec marshals requests with proto and decodes responses lazily into an
// *inbound.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*rawRequest); ok {
		if r.head == nil {
			return nil, errors.New("loadgen codec: request sent twice")
		}
		head := mem.NewBuffer(r.head, reqPool) // gRPC frees it once written
		r.head = nil
		if len(r.names) == 0 {
			return mem.BufferSlice{head}, nil
		}
		return mem.BufferSlice{head, mem.SliceBuffer(r.names)}, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("loadgen codec: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	in, ok := v.(*inbound)
	if !ok {
		return errors.New("loadgen codec: unexpected receive target")
	}
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		buf := getBuf(data.Len())
		defer putBuf(buf)
		data.CopyTo(*buf)
		b = *buf
	}
	r := getResponse()
	var err error
	if in.delta {
		err = in.dec.decodeDelta(b, r)
	} else {
		err = in.dec.decodeSotW(b, r)
	}
	if err != nil {
		putResponse(r)
		in.err = err
		return err
	}
	in.resp, in.err = r, nil
	return nil
}

var (
	bufPool  sync.Pool // *[]byte: messages that arrived in several buffers
	respPool = sync.Pool{New: func() any { return new(response) }}
)

func getBuf(n int) *[]byte {
	if bp, ok := bufPool.Get().(*[]byte); ok && cap(*bp) >= n {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, n+n/4)
	return &b
}

func putBuf(b *[]byte) { bufPool.Put(b) }

func getResponse() *response { return respPool.Get().(*response) }

// putResponse returns r to the pool, dropping entries that would pin a lot
// of memory.
func putResponse(r *response) {
	if r == nil {
		return
	}
	if cap(r.entries) > 1<<16 {
		r.entries = nil
	}
	respPool.Put(r)
}
