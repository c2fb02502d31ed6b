package serve_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// FuzzADSRequests sends arbitrary request sequences on one stream of a real
// server: the first byte picks SotW or Delta, the rest is a series of
// length-prefixed encoded requests (undecodable ones are skipped). The
// server must neither crash nor hang, every response must decode, and
// nonces must never repeat on the stream.
func FuzzADSRequests(f *testing.F) {
	seed := func(delta bool, reqs ...proto.Message) {
		data := []byte{0}
		if delta {
			data[0] = 1
		}
		for _, r := range reqs {
			b, err := proto.Marshal(r)
			if err != nil {
				f.Fatal(err)
			}
			data = protowire.AppendBytes(data, b)
		}
		f.Add(data)
	}
	node := &corev3.Node{Id: "fuzz"}
	seed(false,
		&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: engine.TypeCluster},
		&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster, ResponseNonce: "1", VersionInfo: "x"},
		&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNames: []string{"c1", "*", "c1"}},
		&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResponseNonce: "2", ErrorDetail: &rpcstatus.Status{Message: "no"}},
		&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeSecret, ResponseNonce: "99"},
	)
	seed(true,
		&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: engine.TypeCluster,
			InitialResourceVersions: map[string]string{"c1": "old", "gone": ""}},
		&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster, ResponseNonce: "1",
			ResourceNamesUnsubscribe: []string{"*", "c2"}, ResourceNamesSubscribe: []string{"c2", "*", ""}},
		&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeRoute, ResourceNamesSubscribe: []string{"r1", "r9"}},
		&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeRoute, ResponseNonce: "3", ErrorDetail: &rpcstatus.Status{}},
	)
	seed(false, &discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster}) // no node
	// Unknown, debug and over-long type URLs, repeated NACKs (issue 21).
	seed(false,
		&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: "type.googleapis.com/unknown.Type"},
		&discoveryv3.DiscoveryRequest{TypeUrl: "istio.io/debug/unknown"},
		&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster},
		&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster, ResponseNonce: "1", ErrorDetail: &rpcstatus.Status{Message: "no"}},
		&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster, ResponseNonce: "1", ErrorDetail: &rpcstatus.Status{Message: "no"}},
		&discoveryv3.DiscoveryRequest{TypeUrl: "type.googleapis.com/" + strings.Repeat("x", 600)},
	)
	seed(true,
		&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: "type.googleapis.com/unknown.Type"},
		&discoveryv3.DeltaDiscoveryRequest{TypeUrl: "type.googleapis.com/unknown.Type", ResponseNonce: "1"},
		&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster},
	)

	b := newTestBackend()
	meshFixture(f, b)
	// Small limits so the fuzzer reaches their errors too (limits.go).
	cc := startServer(f, b, serve.XDSOptions{Limits: serve.Limits{MaxSubscribedNames: 16, RequestConcurrency: 2}})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		delta := data[0]&1 == 1
		var msgs [][]byte
		for rest := data[1:]; len(rest) > 0 && len(msgs) < 32; {
			m, n := protowire.ConsumeBytes(rest)
			if n < 0 {
				break
			}
			msgs, rest = append(msgs, m), rest[n:]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if delta {
			fuzzDelta(ctx, t, cc, msgs)
		} else {
			fuzzSotW(ctx, t, cc, msgs)
		}
		b.push(engine.Push{Full: true}) // exercise pushes against whatever state is left
	})
}

func fuzzSotW(ctx context.Context, t *testing.T, cc *grpc.ClientConn, msgs [][]byte) {
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		req := &discoveryv3.DiscoveryRequest{}
		if proto.Unmarshal(m, req) == nil {
			_ = s.Send(req)
		}
	}
	_ = s.CloseSend()
	nonces := map[string]bool{}
	for {
		r, err := s.Recv()
		if err != nil {
			checkEnd(ctx, t, err)
			return
		}
		if nonces[r.GetNonce()] {
			t.Fatalf("nonce %q repeated", r.GetNonce())
		}
		nonces[r.GetNonce()] = true
		anyNames(t, r.GetResources())
	}
}

func fuzzDelta(ctx context.Context, t *testing.T, cc *grpc.ClientConn, msgs [][]byte) {
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		req := &discoveryv3.DeltaDiscoveryRequest{}
		if proto.Unmarshal(m, req) == nil {
			_ = s.Send(req)
		}
	}
	_ = s.CloseSend()
	nonces := map[string]bool{}
	for {
		r, err := s.Recv()
		if err != nil {
			checkEnd(ctx, t, err)
			return
		}
		if nonces[r.GetNonce()] {
			t.Fatalf("nonce %q repeated", r.GetNonce())
		}
		nonces[r.GetNonce()] = true
		for _, res := range r.GetResources() {
			if _, err := res.GetResource().UnmarshalNew(); err != nil {
				t.Fatalf("resource %q: %v", res.GetName(), err)
			}
		}
	}
}

// checkEnd accepts any end of stream except a hang: after CloseSend the
// server must finish (io.EOF) or refuse (a status) before the deadline.
func checkEnd(ctx context.Context, t *testing.T, err error) {
	if errors.Is(err, io.EOF) {
		return
	}
	if ctx.Err() != nil {
		t.Fatalf("stream hung: %v", err)
	}
}
