package loadgen

import (
	"context"
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// The per-response path end to end, without gRPC's transport: the codec
// decodes a response, the proxy handles it (counters, state, subscriptions,
// full config and convergence checks) and its ACK is marshaled by the codec,
// as grpc-go's SendMsg would.

// sinkStream is a grpc.ClientStream that marshals what is sent with
// rawCodec and drops it; it keeps the last request for checks.
type sinkStream struct {
	grpc.ClientStream
	sent int
	last []byte
}

func (s *sinkStream) SendMsg(m any) error {
	data, err := rawCodec{}.Marshal(m)
	if err != nil {
		return err
	}
	s.sent++
	s.last = s.last[:0]
	for _, b := range data {
		s.last = append(s.last, b.ReadOnlyData()...)
	}
	data.Free()
	return nil
}

func (s *sinkStream) CloseSend() error         { return nil }
func (s *sinkStream) Context() context.Context { return context.Background() }

// handleRig is one sidecar proxy of a run of one proxy, on a sinkStream.
type handleRig struct {
	p    *proxy
	in   inbound
	sink *sinkStream
}

func newHandleRig(t testing.TB, mode Mode) *handleRig {
	return newHandleRigOf(t, Config{XDS: "sink", Proxies: 1, Mode: mode})
}

// newHandleRigOf is newHandleRig with a config of one proxy.
func newHandleRigOf(t testing.TB, cfg Config) *handleRig {
	mode := cfg.Mode
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(cfg)
	p := &proxy{run: r}
	r.proxies[0] = p
	rig := &handleRig{p: p, in: inbound{dec: &r.dec, delta: mode == Delta}, sink: &sinkStream{}}
	p.setStream(newTestStream(mode, rig.sink))
	if err := p.resetSession(); err != nil {
		t.Fatal(err)
	}
	return rig
}

// feed decodes and handles one encoded response.
func (rig *handleRig) feed(b []byte) error {
	if err := (rawCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &rig.in); err != nil {
		return err
	}
	err := rig.p.handle(rig.in.resp)
	putResponse(rig.in.resp)
	rig.in.resp = nil
	return err
}

// benchMesh is a sidecar's config at services services, as encoded
// responses of mode: CDS (EDS clusters), EDS (a CLA each), LDS (two
// listeners) and RDS (their route configurations).
func benchMesh(t testing.TB, mode Mode, services int) [numTypes][]byte {
	var msgs [numTypes][]proto.Message
	for i := range services {
		c := istioLikeCluster(t, i)
		msgs[typeCDS] = append(msgs[typeCDS], c)
		msgs[typeEDS] = append(msgs[typeEDS], cla(c.GetEdsClusterConfig().GetServiceName(), i, 0))
	}
	for _, port := range []int{80, 8080} {
		msgs[typeLDS] = append(msgs[typeLDS], portListener(t, port, 0))
		msgs[typeRDS] = append(msgs[typeRDS], routeConfig(fmt.Sprint(port), 10, 0, func(i int) string { return clusterName(host(i)) }))
	}
	var out [numTypes][]byte
	for ty := range numTypes {
		out[ty] = encodeResponse(t, mode, typeURLs[ty], "v1", "n-"+typeNames[ty], msgs[ty])
	}
	return out
}

// encodeResponse encodes msgs as a SotW or Delta response of typeURL.
func encodeResponse(t testing.TB, mode Mode, typeURL, version, nonce string, msgs []proto.Message) []byte {
	if mode == SotW {
		resp := &discoveryv3.DiscoveryResponse{VersionInfo: version, TypeUrl: typeURL, Nonce: nonce}
		for _, m := range msgs {
			resp.Resources = append(resp.Resources, mustAny(t, m))
		}
		b, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	resp := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: version, TypeUrl: typeURL, Nonce: nonce}
	for _, m := range msgs {
		a := mustAny(t, m)
		name := ""
		switch m := m.(type) {
		case interface{ GetName() string }:
			name = m.GetName()
		case interface{ GetClusterName() string }:
			name = m.GetClusterName()
		}
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: name, Version: version, Resource: a})
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fullRig returns a rig whose proxy has full config of benchMesh.
func fullRig(t testing.TB, mode Mode, services int) *handleRig {
	rig := newHandleRig(t, mode)
	for _, b := range benchMesh(t, mode, services) {
		if err := rig.feed(b); err != nil {
			t.Fatal(err)
		}
	}
	if !rig.p.full {
		t.Fatalf("proxy has no full config: held cds %d eds %d lds %d rds %d",
			rig.p.held(typeCDS), rig.p.held(typeEDS), rig.p.held(typeLDS), rig.p.held(typeRDS))
	}
	return rig
}

// edsPushes are n delta EDS pushes of one CLA each (services round robin),
// each with its own nonce, as an endpoint churn sends them.
func edsPushes(t testing.TB, services, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		s := i % services
		name := istioLikeCluster(t, s).GetEdsClusterConfig().GetServiceName()
		out[i] = encodeResponse(t, Delta, EndpointType, "", fmt.Sprintf("nonce-%d", 1000+i),
			[]proto.Message{cla(name, s, i+1)})
	}
	return out
}

// BenchmarkHandleDeltaEDS is one delta EDS push of one CLA to a sidecar
// holding 1,000 services: decode, bookkeeping and the ACK.
func BenchmarkHandleDeltaEDS(b *testing.B) {
	const services = 1000
	rig := fullRig(b, Delta, services)
	pushes := edsPushes(b, services, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := rig.feed(pushes[i%len(pushes)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkHandleSotWCDS is a SotW CDS push of 1,000 clusters (a new
// version of the same clusters) to a sidecar holding them.
func BenchmarkHandleSotWCDS(b *testing.B) {
	const services = 1000
	rig := fullRig(b, SotW, services)
	var msgs []proto.Message
	for i := range services {
		msgs = append(msgs, istioLikeCluster(b, i))
	}
	pushes := [2][]byte{
		encodeResponse(b, SotW, ClusterType, "v2", "n-2", msgs),
		encodeResponse(b, SotW, ClusterType, "v3", "n-3", msgs),
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pushes[0])))
	i := 0
	for b.Loop() {
		if err := rig.feed(pushes[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// newTestStream wraps cs as a stream of mode.
func newTestStream(mode Mode, cs grpc.ClientStream) stream {
	if mode == Delta {
		return deltaStream{cs}
	}
	return sotwStream{cs}
}
