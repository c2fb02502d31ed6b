package serve_test

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// SotW conformance tests. Where a test proves that nothing was sent, it
// follows the quiet step with a change that must be the very next response:
// a stream's responses are ordered, so a spurious one would arrive first.

// sotwSynced returns a client that fetched all four types as Envoy does
// (CDS, then EDS for its clusters, LDS, then RDS for its routes) and ACKed
// them. It returns the last response of each type.
func sotwSynced(t *testing.T, cc *grpc.ClientConn, id string) (*sotwClient, map[string]*discoveryv3.DiscoveryResponse) {
	t.Helper()
	c := newSotWClient(t, cc, id)
	last := map[string]*discoveryv3.DiscoveryResponse{}
	c.request(engine.TypeCluster)
	last[engine.TypeCluster] = c.expect(engine.TypeCluster, "c1", "c2")
	c.ack(last[engine.TypeCluster])
	c.request(engine.TypeEndpoint, "c1", "c2")
	last[engine.TypeEndpoint] = c.expect(engine.TypeEndpoint, "c1", "c2")
	c.ack(last[engine.TypeEndpoint], "c1", "c2")
	c.request(engine.TypeListener)
	last[engine.TypeListener] = c.expect(engine.TypeListener, "svc.test:80")
	c.ack(last[engine.TypeListener])
	c.request(engine.TypeRoute, "r1")
	last[engine.TypeRoute] = c.expect(engine.TypeRoute, "r1")
	c.ack(last[engine.TypeRoute], "r1")
	return c, last
}

func TestSotWInitialFetchAckAndPushOrder(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{ControlPlaneID: "pilotfish-0"})
	c, last := sotwSynced(t, cc, "p")
	s := b.session(t, "p")
	waitFor(t, "4 ACKs", func() bool { a, _ := s.counts(); return a == 4 })
	s.mu.Lock()
	wantAck := engine.TypeCluster + " " + last[engine.TypeCluster].GetVersionInfo()
	if s.acks[0] != wantAck {
		t.Errorf("first ACK %q, want %q", s.acks[0], wantAck)
	}
	s.mu.Unlock()
	if got := last[engine.TypeCluster].GetControlPlane().GetIdentifier(); got != "pilotfish-0" {
		t.Errorf("control_plane.identifier = %q", got)
	}

	// Version is a content digest: a second proxy sees the same version.
	c2 := newSotWClient(t, cc, "p2")
	c2.request(engine.TypeCluster)
	if v := c2.expect(engine.TypeCluster, "c1", "c2").GetVersionInfo(); v != last[engine.TypeCluster].GetVersionInfo() {
		t.Errorf("versions differ across streams: %s vs %s", v, last[engine.TypeCluster].GetVersionInfo())
	}

	// A full push where everything changed arrives in CDS, EDS, LDS, RDS
	// order, each a complete set.
	b.set(t, cluster("c1", 1), cla("c2", "10.0.0.3", 80),
		apiListener(t, "svc.test:80", "r1"), routeConfig("r1", "svc.test:80", "c2"))
	b.set(t, cluster("c0", 0))
	b.push(engine.Push{Full: true})
	// The listener is byte-identical (rebuilt from the same inputs): no LDS.
	c.expect(engine.TypeCluster, "c0", "c1", "c2")
	c.expect(engine.TypeEndpoint, "c1", "c2")
	c.expect(engine.TypeRoute, "r1")
	c.expectQuiet()

	// Every response was reported Sent with its version_info, and every
	// push signal was followed by PushDone.
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sent) != 7 || s.sent[0] != engine.TypeCluster+" "+last[engine.TypeCluster].GetVersionInfo() {
		t.Errorf("sent = %q", s.sent)
	}
	if s.signals != 1 || s.pushDones != 1 {
		t.Errorf("%d push signals, %d PushDone", s.signals, s.pushDones)
	}
}

func TestSotWNackIsNotAnsweredWithTheSameConfig(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	m := newTestMetrics()
	cc := startServer(t, b, serve.XDSOptions{Metrics: m})
	c, last := sotwSynced(t, cc, "p")
	s := b.session(t, "p")

	b.set(t, cluster("c1", 1))
	b.push(engine.Push{Full: true})
	bad := c.expect(engine.TypeCluster, "c1", "c2")
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster, VersionInfo: last[engine.TypeCluster].GetVersionInfo(),
		ResponseNonce: bad.GetNonce(), ErrorDetail: &status.Status{Code: 3, Message: "cluster c1: bad timeout"}})
	waitFor(t, "NACK recorded", func() bool { _, n := s.counts(); return n == 1 })
	if got := m.rejectedOf(engine.TypeCluster); got != 1 {
		t.Errorf("rejected = %d, want 1", got)
	}
	s.mu.Lock()
	if want := engine.TypeCluster + " " + bad.GetVersionInfo() + ": cluster c1: bad timeout"; s.nacks[0] != want {
		t.Errorf("nack %q, want %q", s.nacks[0], want)
	}
	s.mu.Unlock()

	// Pushes without a change do not resend the rejected config...
	b.push(engine.Push{Full: true})
	b.push(engine.Push{Types: []string{engine.TypeCluster}})
	// ...a change does.
	b.set(t, cluster("c1", 2))
	b.push(engine.Push{Types: []string{engine.TypeCluster}})
	good := c.expect(engine.TypeCluster, "c1", "c2")
	if good.GetVersionInfo() == bad.GetVersionInfo() {
		t.Fatal("resent the rejected version")
	}
	c.ack(good)
	waitFor(t, "ACK after NACK", func() bool { a, _ := s.counts(); return a == 5 })
	c.expectQuiet()
}

func TestSotWStaleNonceIgnored(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c, last := sotwSynced(t, cc, "p")

	b.set(t, cla("c1", "10.0.0.9", 80))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c1"}})
	// The endpoint fast path sends only the changed assignment.
	fresh := c.expect(engine.TypeEndpoint, "c1")
	// A request answering the older response, changing names: stale.
	c.ack(last[engine.TypeEndpoint], "c1")
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResponseNonce: last[engine.TypeEndpoint].GetNonce(),
		ErrorDetail: &status.Status{Message: "late NACK"}})
	// The current one, also changing names: answered.
	c.ack(fresh, "c2")
	c.expect(engine.TypeEndpoint, "c2")
	c.expectQuiet()
	if _, n := b.session(t, "p").counts(); n != 0 {
		t.Errorf("stale NACK recorded")
	}
}

func TestSotWEndpointSubscriptions(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c := newSotWClient(t, cc, "p")
	c.request(engine.TypeEndpoint, "c1")
	r := c.expect(engine.TypeEndpoint, "c1")
	// Subscribing to more clusters: EDS is not state of the world for the
	// proxy, so only the added ones that exist are sent, under the digest
	// of the whole set.
	c.ack(r, "c1", "c2", "missing")
	added := c.expect(engine.TypeEndpoint, "c2")
	c.ack(added, "c1", "c2", "missing")
	// A full push of the same content sends nothing (the proxy holds it),
	// nor does unsubscribing c1: the next response is the change of c2.
	s := b.session(t, "p")
	done := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.pushDones }
	acks := func() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.acks) }
	// quietAck sends an ACK that gets no response and waits until the
	// stream has handled it (a response would be the sync point otherwise).
	quietAck := func(r *discoveryv3.DiscoveryResponse, names ...string) {
		t.Helper()
		n := acks()
		c.ack(r, names...)
		waitFor(t, "the ACK handled", func() bool { return acks() > n })
	}
	before := done()
	b.push(engine.Push{Full: true})
	waitFor(t, "the full push handled", func() bool { return done() > before })
	quietAck(added, "c2")
	b.set(t, cla("c2", "10.0.0.9", 80))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c2"}})
	r = c.expect(engine.TypeEndpoint, "c2")
	quietAck(r, "c2")

	// The endpoint fast path: a change to an unwatched cluster sends nothing.
	b.set(t, cla("c1", "10.0.0.7", 80))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c1"}})
	b.set(t, cla("c2", "10.0.0.8", 80))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c2"}})
	r = c.expect(engine.TypeEndpoint, "c2")
	// After a partial update the proxy's set is not known to match a full
	// set's digest: a subscription change is answered in full — here the
	// empty set, as all are unsubscribed.
	c.ack(r)
	r = c.expect(engine.TypeEndpoint)
	c.ack(r, "c1", "c2") // from the empty set, both are added
	c.expect(engine.TypeEndpoint, "c1", "c2")
	c.expectQuiet()
}

// TestSotWEndpointSubscriptionAfterNack: a proxy that rejected its last
// EDS response gets the whole set on its next subscription change, not
// just the added clusters.
func TestSotWEndpointSubscriptionAfterNack(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c := newSotWClient(t, cc, "p")
	c.request(engine.TypeEndpoint, "c1")
	r := c.expect(engine.TypeEndpoint, "c1")
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResponseNonce: r.GetNonce(),
		ResourceNames: []string{"c1"}, ErrorDetail: &status.Status{Code: 3, Message: "bad endpoints"}})
	c.ack(r, "c1", "c2")
	c.expect(engine.TypeEndpoint, "c1", "c2")
}

func TestSotWWildcard(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	legacy := newSotWClient(t, cc, "legacy")
	legacy.request(engine.TypeCluster)
	legacy.ack(legacy.expect(engine.TypeCluster, "c1", "c2"))
	explicit := newSotWClient(t, cc, "explicit")
	explicit.request(engine.TypeCluster, "*", "c1")
	explicit.ack(explicit.expect(engine.TypeCluster, "c1", "c2"), "*", "c1")
	named := newSotWClient(t, cc, "named") // grpc-go asks for clusters by name
	named.request(engine.TypeCluster, "c1")
	named.ack(named.expect(engine.TypeCluster, "c1"), "c1")

	b.set(t, cluster("c3", 0))
	b.push(engine.Push{Full: true})
	legacy.expect(engine.TypeCluster, "c1", "c2", "c3")
	explicit.expect(engine.TypeCluster, "c1", "c2", "c3")
	b.set(t, cluster("c1", 1))
	b.push(engine.Push{Full: true})
	named.expect(engine.TypeCluster, "c1") // and not the c3 push before it
	named.expectQuiet()
}

func TestSotWRemoval(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c, _ := sotwSynced(t, cc, "p")
	b.remove(engine.TypeCluster, "c2")
	b.remove(engine.TypeEndpoint, "c2")
	b.push(engine.Push{Full: true})
	c.expect(engine.TypeCluster, "c1")
	c.expect(engine.TypeEndpoint, "c1")
	c.expectQuiet()
}

func TestSotWPushWithoutChangeSendsNothing(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	m := newTestMetrics()
	cc := startServer(t, b, serve.XDSOptions{Metrics: m})
	c, _ := sotwSynced(t, cc, "p")
	meshFixture(t, b) // same content again
	b.push(engine.Push{Full: true})
	b.push(engine.Push{Types: []string{engine.TypeListener, engine.TypeRoute}})
	b.set(t, routeConfig("r1", "svc.test:80", "c2"))
	b.push(engine.Push{Full: true})
	c.expect(engine.TypeRoute, "r1")
	c.expectQuiet()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pushed[engine.TypeCluster] != 1 || m.pushed[engine.TypeRoute] != 2 || m.pushedBytes == 0 {
		t.Errorf("pushed %v (%d bytes)", m.pushed, m.pushedBytes)
	}
}

// TestSotWReconnect checks that a proxy reconnecting with a version and a
// nonce from an earlier stream (or another replica) is answered at once.
func TestSotWReconnect(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c := newSotWClient(t, cc, "p")
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster, VersionInfo: "0123456789abcdef", ResponseNonce: "7"})
	c.expect(engine.TypeCluster, "c1", "c2")
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeRoute, VersionInfo: "x", ResponseNonce: "uuid-nonce", ResourceNames: []string{"r1"}})
	r := c.expect(engine.TypeRoute, "r1")
	if !strings.ContainsFunc(r.GetVersionInfo(), func(r rune) bool { return r != '0' }) || len(r.GetNonce()) == 0 {
		t.Errorf("version %q nonce %q", r.GetVersionInfo(), r.GetNonce())
	}
	// Names are a set: order and duplicates do not count as a change.
	c.ack(r, "r1", "r1")
	c.expectQuiet()
}
