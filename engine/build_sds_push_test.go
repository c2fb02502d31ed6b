package engine

import (
	"bytes"
	"context"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"

	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

func routerNode(t testing.TB, ip, pod, ns string) *corev3.Node {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "ISTIO_VERSION": "1.31.0", "CLUSTER_ID": "Kubernetes"})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: "router~" + ip + "~" + pod + "." + ns + "~" + ns + ".svc.cluster.local", Metadata: md}
}

// pushCounts records PushQueued by reason.
type pushCounts struct {
	recordDebounce
	mu     sync.Mutex
	counts map[string]int
}

func (p *pushCounts) PushQueued(reason string, conns int) {
	p.mu.Lock()
	p.counts[reason] += conns
	p.mu.Unlock()
}

// waitFor waits until a push of reason was decided (up to 5s), so that
// "no proxy got a push" is checked after the decision, not before it.
func (p *pushCounts) waitFor(reason string) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		_, ok := p.counts[reason]
		p.mu.Unlock()
		if ok {
			return
		}
	}
}

// take returns the counts recorded since the last take.
func (p *pushCounts) take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	p.counts = map[string]int{}
	return c
}

// sdsSecretRow is Secret ns/name holding a certificate and key.
func sdsSecretRow(sy *index.Symbols, ns, name string, cert, key []byte) index.Config {
	return index.Config{
		Kind: index.ConfigSecret, Key: index.ConfigKey{Namespace: sy.Intern(ns), Name: sy.Intern(name)},
		Spec: map[string][]byte{"tls.crt": cert, "tls.key": key},
		Hash: xxhash.Sum64(cert) ^ xxhash.Sum64String(ns+"/"+name),
	}
}

// sdsCerts generates for c what its SDS request names and returns each
// served Secret's certificate chain by name.
func sdsCerts(t *testing.T, c *Conn, names ...string) map[string][]byte {
	t.Helper()
	res, err := c.Generate(TypeSecret, names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, r := range res {
		var a anypb.Any
		s := &tlsv3.Secret{}
		if err := proto.Unmarshal(r.Any, &a); err != nil {
			t.Fatal(err)
		}
		if err := a.UnmarshalTo(s); err != nil {
			t.Fatal(err)
		}
		if err := s.ValidateAll(); err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		out[r.Name] = s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()
	}
	return out
}

// TestSecretChangePushesSDSToItsReadersOnly: creating, rotating or deleting
// a Secret pushes SDS — and only SDS — to the connections of its namespace
// whose SDS requests read it (NAME, NAME-cacert falling back to NAME),
// and to nothing else: not another name's reader, not a proxy of another
// namespace asking for the same name, not a proxy without SDS. Counted per
// connection and in pilot_xds_pushes. A Secret changed with other config
// rides the full push.
func TestSecretChangePushesSDSToItsReadersOnly(t *testing.T) {
	w := index.NewWriter()
	sy := w.Symbols()
	cert1, key1 := testcert.SelfSigned(t, "gw.example.com")
	var b index.Batch
	b.PutConfig(sdsSecretRow(sy, "gw", "gw-cert", cert1, key1))
	b.PutConfig(sdsSecretRow(sy, "gw", "other-cert", cert1, key1))
	b.PutConfig(sdsSecretRow(sy, "other", "gw-cert", cert1, key1))
	w.Apply(&b)

	counts := &pushCounts{recordDebounce: func(time.Duration) {}, counts: map[string]int{}}
	e := New(w, Options{DebounceAfter: 5 * time.Millisecond, Metrics: counts})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	connect := func(n *corev3.Node) *Conn {
		c, err := e.Connect(ctx, n, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	reader := connect(routerNode(t, "10.2.0.1", "r1", "gw"))
	otherName := connect(routerNode(t, "10.2.0.2", "r2", "gw"))
	caReader := connect(routerNode(t, "10.2.0.3", "r3", "gw"))
	otherNS := connect(routerNode(t, "10.2.0.4", "r4", "other"))
	sidecar := connect(sidecarNode(t, "10.2.0.5", "s1", "gw"))
	if got := sdsCerts(t, reader, "kubernetes://gw-cert"); !bytes.Equal(got["kubernetes://gw-cert"], cert1) {
		t.Fatalf("reader got %v", got)
	}
	if got := sdsCerts(t, otherName, "kubernetes://other-cert", "kubernetes://late-cert"); len(got) != 1 {
		t.Fatalf("otherName got %d secrets, want 1 (late-cert does not exist yet)", len(got))
	}
	sdsCerts(t, caReader, "kubernetes://gw-cert-cacert") // no CA in the Secret: not served, but read
	// The same name in its own namespace, and gw's by NS/NAME (refused).
	if got := sdsCerts(t, otherNS, "kubernetes://gw-cert", "kubernetes://gw/gw-cert"); len(got) != 1 {
		t.Fatalf("otherNS got %d secrets, want 1", len(got))
	}
	all := []*Conn{reader, otherName, caReader, otherNS, sidecar}

	// expect checks that exactly want got a push, an SDS-only one, and
	// that pilot_xds_pushes counted len(want) "secret" pushes and nothing
	// else.
	expect := func(step string, want ...*Conn) {
		t.Helper()
		counts.waitFor("secret")
		for _, c := range want {
			p, ok := waitPush(t, c, 5*time.Second)
			if !ok || p.Full || len(p.Types) != 1 || p.Types[0] != TypeSecret {
				t.Fatalf("%s: %s got %+v (ok=%v), want an SDS-only push", step, c.ID(), p, ok)
			}
		}
		for _, c := range all {
			if p, ok := waitPush(t, c, 200*time.Millisecond); ok {
				t.Fatalf("%s: %s got an extra push %+v", step, c.ID(), p)
			}
		}
		if got := counts.take(); len(got) != 1 || got["secret"] != len(want) {
			t.Fatalf("%s: pushes queued %v, want secret:%d", step, got, len(want))
		}
	}

	// Rotation of gw/gw-cert: its reader and the CA name's reader.
	cert2, key2 := testcert.SelfSigned(t, "gw.example.com")
	b = index.Batch{}
	b.PutConfig(sdsSecretRow(sy, "gw", "gw-cert", cert2, key2))
	w.Apply(&b)
	expect("rotate gw/gw-cert", reader, caReader)
	if got := sdsCerts(t, reader, "kubernetes://gw-cert"); !bytes.Equal(got["kubernetes://gw-cert"], cert2) {
		t.Fatal("after the push the reader does not get the rotated certificate")
	}

	// Creation of a Secret a router asked for before it existed.
	b = index.Batch{}
	b.PutConfig(sdsSecretRow(sy, "gw", "late-cert", cert2, key2))
	w.Apply(&b)
	expect("create gw/late-cert", otherName)
	if got := sdsCerts(t, otherName, "kubernetes://other-cert", "kubernetes://late-cert"); len(got) != 2 {
		t.Fatalf("otherName got %d secrets after late-cert was created, want 2", len(got))
	}

	// Deletion.
	b = index.Batch{}
	b.DeleteConfig(index.ConfigSecret, index.ConfigKey{Namespace: sy.Intern("gw"), Name: sy.Intern("gw-cert")})
	w.Apply(&b)
	expect("delete gw/gw-cert", reader, caReader)
	if got := sdsCerts(t, reader, "kubernetes://gw-cert"); len(got) != 0 {
		t.Fatal("a deleted Secret is still served")
	}

	// A Secret nobody reads pushes nothing.
	b = index.Batch{}
	b.PutConfig(sdsSecretRow(sy, "gw", "unread", cert2, key2))
	w.Apply(&b)
	expect("create gw/unread")

	// With other config in the same change, the full push covers SDS.
	b = index.Batch{}
	b.PutConfig(sdsSecretRow(sy, "other", "gw-cert", cert2, key2))
	b.PutService(index.Service{Key: index.ServiceKey{Host: sy.Intern("new.gw.svc.cluster.local"), Namespace: sy.Intern("gw")},
		Origin: index.OriginKubernetes, Ports: []index.Port{{Number: 80, Protocol: index.ProtocolHTTP}}})
	w.Apply(&b)
	for _, c := range all {
		if p, ok := waitPush(t, c, 5*time.Second); !ok || !p.Full {
			t.Fatalf("secret with a service: %s got %+v (ok=%v), want a full push", c.ID(), p, ok)
		}
	}
	if got := sdsCerts(t, otherNS, "kubernetes://gw-cert"); !bytes.Equal(got["kubernetes://gw-cert"], cert2) {
		t.Fatal("other/gw-cert not rotated after the full push")
	}

	// With endpoints in the same change, both fast paths run: SDS to the
	// Secret's reader, EDS to the proxies that see the service, no full
	// push, and no SDS to anyone else.
	b = index.Batch{}
	b.PutConfig(sdsSecretRow(sy, "other", "gw-cert", cert1, key1))
	b.PutEndpoints(index.ServiceKey{Host: sy.Intern("new.gw.svc.cluster.local"), Namespace: sy.Intern("gw")},
		index.EndpointGroup{Source: sy.Intern("slice"), Endpoints: []index.Endpoint{{Addr: netip.MustParseAddr("10.9.0.1")}}})
	w.Apply(&b)
	types := map[*Conn]map[string]bool{}
	for _, c := range all {
		types[c] = map[string]bool{}
		for {
			p, ok := waitPush(t, c, 300*time.Millisecond)
			if !ok {
				break
			}
			if p.Full {
				t.Fatalf("secret with endpoints: %s got a full push", c.ID())
			}
			for _, ty := range p.Types {
				types[c][ty] = true
			}
		}
	}
	if !types[otherNS][TypeSecret] || !types[sidecar][TypeEndpoint] {
		t.Fatalf("secret with endpoints: the reader got %v, the sidecar %v; want SDS and EDS", types[otherNS], types[sidecar])
	}
	for _, c := range []*Conn{reader, otherName, caReader, sidecar} {
		if types[c][TypeSecret] {
			t.Errorf("secret with endpoints: %s got SDS for a Secret it does not read", c.ID())
		}
	}

	// With a change a scope rules out (a DestinationRule for a service
	// private to namespace b), the full push goes to no one here, and the
	// Secret's reader still gets SDS.
	nsB := sy.Intern("b")
	private := index.ServiceKey{Host: sy.Intern("p.b.svc.cluster.local"), Namespace: nsB}
	b = index.Batch{}
	b.PutService(index.Service{Key: private, Origin: index.OriginKubernetes, ExportTo: index.ExportTo{Private: true},
		Ports: []index.Port{{Number: 80, Protocol: index.ProtocolHTTP}}})
	w.Apply(&b)
	for _, c := range all {
		for ok := true; ok; _, ok = waitPush(t, c, 300*time.Millisecond) {
		}
	}
	counts.take()
	b = index.Batch{}
	b.PutConfig(index.Config{Kind: index.ConfigDestinationRule, Key: index.ConfigKey{Namespace: nsB, Name: sy.Intern("p")},
		Hosts: []index.Sym{private.Host}, Spec: &networking.DestinationRule{Host: "p.b.svc.cluster.local"}, Hash: 1})
	b.PutConfig(sdsSecretRow(sy, "gw", "other-cert", cert2, key2))
	w.Apply(&b)
	p, ok := waitPush(t, otherName, 5*time.Second)
	if !ok || !(p.Full || slices.Contains(p.Types, TypeSecret)) {
		t.Fatalf("secret with an unrelated DestinationRule: the reader got %+v (ok=%v), want SDS", p, ok)
	}
	for _, c := range all {
		if p, ok := waitPush(t, c, 200*time.Millisecond); ok {
			t.Fatalf("secret with an unrelated DestinationRule: %s got %+v", c.ID(), p)
		}
	}
	if got := counts.take(); got["secret"] != 1 || got["config"] != 0 {
		t.Fatalf("secret with an unrelated DestinationRule: pushes queued %v, want secret:1 and no config push", got)
	}
}

// TestSecretChangeReusesScopes: after a Secret rotation a class's scope is
// the previous one carried to the new snapshot (no new NewScope: the
// service view is the same map), and SDS from it serves the new Secret.
func TestSecretChangeReusesScopes(t *testing.T) {
	w := index.NewWriter()
	sy := w.Symbols()
	cert1, key1 := testcert.SelfSigned(t, "gw.example.com")
	var b index.Batch
	b.PutService(index.Service{Key: index.ServiceKey{Host: sy.Intern("a.gw.svc.cluster.local"), Namespace: sy.Intern("gw")},
		Origin: index.OriginKubernetes, Ports: []index.Port{{Number: 80, Protocol: index.ProtocolHTTP}}})
	b.PutConfig(sdsSecretRow(sy, "gw", "gw-cert", cert1, key1))
	w.Apply(&b)
	e := New(w, Options{})
	c, err := e.Connect(context.Background(), routerNode(t, "10.2.0.1", "r1", "gw"), "")
	if err != nil {
		t.Fatal(err)
	}
	before := c.class.scope(e)
	if len(before.ByHost) == 0 {
		t.Fatal("the router's scope sees no service")
	}

	cert2, key2 := testcert.SelfSigned(t, "gw.example.com")
	b = index.Batch{}
	b.PutConfig(sdsSecretRow(sy, "gw", "gw-cert", cert2, key2))
	w.Apply(&b)
	after := c.class.scope(e)
	if after.Snapshot == before.Snapshot {
		t.Fatal("the scope was not moved to the new snapshot")
	}
	if reflect.ValueOf(after.ByHost).UnsafePointer() != reflect.ValueOf(before.ByHost).UnsafePointer() {
		t.Error("a Secret rotation made the class compute its scope again")
	}
	if got := sdsCerts(t, c, "kubernetes://gw-cert"); !bytes.Equal(got["kubernetes://gw-cert"], cert2) {
		t.Error("SDS from the carried scope does not serve the rotated Secret")
	}
}
