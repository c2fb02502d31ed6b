package encode_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// lrRows builds index rows by hand for LDS and RDS generator tests.
type lrRows struct {
	syms *index.Symbols
}

// lrSyms is the symbol table of every lrRows (one table, so that the
// generator helpers resolve with lrNames whatever rows a test built).
var (
	lrSyms  = index.NewSymbols()
	lrNames = index.NamesOf(lrSyms, nil)
)

func newLRRows() *lrRows { return &lrRows{syms: lrSyms} }

func (r *lrRows) sym(s string) index.Sym { return r.syms.Intern(s) }

func (r *lrRows) svc(host, ns string, origin index.Origin, addrs []string, ports ...index.Port) *index.Service {
	s := &index.Service{
		Key:    index.ServiceKey{Host: r.sym(host), Namespace: r.sym(ns)},
		Origin: origin,
		Ports:  ports,
		Hash:   xxhash.Sum64String(host + "/" + ns),
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a); err == nil {
			s.Addresses = append(s.Addresses, p)
		} else {
			ip := netip.MustParseAddr(a)
			s.Addresses = append(s.Addresses, netip.PrefixFrom(ip, ip.BitLen()))
		}
		s.Hash ^= xxhash.Sum64String(a)
	}
	return s
}

func (r *lrRows) vs(name, ns string, spec *networking.VirtualService) *index.Config {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		panic(err)
	}
	return &index.Config{
		Kind: index.ConfigVirtualService,
		Key:  index.ConfigKey{Namespace: r.sym(ns), Name: r.sym(name)},
		Spec: spec,
		Hash: xxhash.Sum64(b),
	}
}

func (r *lrRows) vhKey(svc *index.Service, port uint32) *encode.VirtualHostKey {
	return &encode.VirtualHostKey{
		Type: encode.ProxySidecar, Namespace: "default",
		DomainSuffix: "cluster.local", Port: port, Service: svc,
	}
}

func httpP(n uint32) index.Port { return index.Port{Number: n, Protocol: index.ProtocolHTTP} }

// lrValidate runs go-control-plane's ValidateAll on m and on every message
// packed in an Any inside it (per-filter configs, typed configs), which
// ValidateAll does not open.
func lrValidate(t testing.TB, m proto.Message) {
	t.Helper()
	if err := lrValidateDeep(m.ProtoReflect()); err != nil {
		t.Fatalf("invalid %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
}

func lrValidateDeep(m protoreflect.Message) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			// Istio extension types (TypedStruct payloads) may be unknown.
			return nil
		}
		return lrValidateDeep(inner.ProtoReflect())
	}
	if v, ok := m.Interface().(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return err
		}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = lrValidateDeep(l.Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = lrValidateDeep(mv.Message())
				return err == nil
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			err = lrValidateDeep(v.Message())
		}
		return err == nil
	})
	return err
}

func genVH(t testing.TB, k *encode.VirtualHostKey) *route.VirtualHost {
	t.Helper()
	_, m := encode.VirtualHost(lrNames, k)
	vh := m.(*route.VirtualHost)
	lrValidate(t, vh)
	return vh
}

func TestVirtualHostDomains(t *testing.T) {
	r := newLRRows()
	kube := func(name, ns string, addrs ...string) *index.Service {
		return r.svc(name+"."+ns+".svc.cluster.local", ns, index.OriginKubernetes, addrs, httpP(8080))
	}
	tests := []struct {
		name string
		key  func() *encode.VirtualHostKey
		want []string
	}{
		{"service entry with VIP", func() *encode.VirtualHostKey {
			return r.vhKey(r.svc("random-0.host.example", "default", index.OriginServiceEntry, []string{"240.240.0.0"}, httpP(80)), 80)
		}, []string{"random-0.host.example", "random-0.host.example.", "240.240.0.0"}},
		{"service entry without VIP", func() *encode.VirtualHostKey {
			return r.vhKey(r.svc("example.com", "default", index.OriginServiceEntry, nil, httpP(80)), 80)
		}, []string{"example.com", "example.com."}},
		{"kubernetes, proxy in the same namespace", func() *encode.VirtualHostKey {
			return r.vhKey(kube("reviews", "default", "10.0.0.9"), 8080)
		}, []string{"reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local.", "reviews", "reviews.default.svc", "reviews.default", "10.0.0.9"}},
		{"kubernetes, proxy in another namespace", func() *encode.VirtualHostKey {
			return r.vhKey(kube("reviews", "shop", "10.0.0.9"), 8080)
		}, []string{"reviews.shop.svc.cluster.local", "reviews.shop.svc.cluster.local.", "reviews.shop", "reviews.shop.svc", "10.0.0.9"}},
		{"headless kubernetes", func() *encode.VirtualHostKey {
			s := kube("db", "default")
			s.Resolution = index.ResolutionPassthrough
			return r.vhKey(s, 8080)
		}, []string{"db.default.svc.cluster.local", "db.default.svc.cluster.local.", "db", "db.default.svc", "db.default",
			"*.db.default.svc.cluster.local", "*.db.default.svc.cluster.local.", "*.db", "*.db.default.svc", "*.db.default"}},
		{"dual-stack VIPs", func() *encode.VirtualHostKey {
			return r.vhKey(r.svc("v6.example", "default", index.OriginServiceEntry, []string{"10.1.1.1", "fd00::1"}, httpP(80)), 80)
		}, []string{"v6.example", "v6.example.", "10.1.1.1", "[fd00::1]"}},
		{"CIDR address", func() *encode.VirtualHostKey {
			return r.vhKey(r.svc("net.example", "default", index.OriginServiceEntry, []string{"10.2.0.0/16"}, httpP(80)), 80)
		}, []string{"net.example", "net.example.", "10.2.0.0/16"}},
		{"proxyless gRPC lists ports", func() *encode.VirtualHostKey {
			k := r.vhKey(r.svc("random-0.host.example", "default", index.OriginServiceEntry, []string{"240.240.0.0"}, httpP(80)), 80)
			k.Type = encode.ProxyGRPC
			return k
		}, []string{"random-0.host.example", "random-0.host.example:80", "random-0.host.example.", "random-0.host.example.:80", "240.240.0.0", "240.240.0.0:80"}},
		{"ExternalName alias", func() *encode.VirtualHostKey {
			k := r.vhKey(kube("backend", "default", "10.0.0.7"), 8080)
			alias := kube("legacy", "default")
			alias.ExternalName = r.sym("backend.default.svc.cluster.local")
			k.Aliases = []*index.Service{alias}
			return k
		}, []string{"backend.default.svc.cluster.local", "backend.default.svc.cluster.local.", "backend", "backend.default.svc", "backend.default",
			"legacy.default.svc.cluster.local", "legacy.default.svc.cluster.local.", "legacy", "legacy.default.svc", "legacy.default", "10.0.0.7"}},
		{"excluded domains", func() *encode.VirtualHostKey {
			k := r.vhKey(kube("reviews", "default", "10.0.0.9"), 8080)
			k.Exclude = []uint64{encode.VirtualHostDomainHash("reviews"), encode.VirtualHostDomainHash("10.0.0.9")}
			return k
		}, []string{"reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local.", "reviews.default.svc", "reviews.default"}},
		{"VirtualService host that names no service", func() *encode.VirtualHostKey {
			k := r.vhKey(nil, 80)
			k.Host = "bookinfo.com"
			k.VirtualService = r.vs("bookinfo", "default", &networking.VirtualService{Hosts: []string{"bookinfo.com"},
				Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "productpage"}}}}}})
			return k
		}, []string{"bookinfo.com"}},
		{"sniffed port", func() *encode.VirtualHostKey {
			k := r.vhKey(kube("reviews", "default", "10.0.0.9"), 8080)
			k.Sniffed = true
			return k
		}, []string{"*"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.key()
			vh := genVH(t, k)
			if !slices.Equal(vh.Domains, tc.want) {
				t.Errorf("domains = %q\nwant      %q", vh.Domains, tc.want)
			}
			if vh.Name != k.Name(lrNames) {
				t.Errorf("name = %q, want %q", vh.Name, k.Name(lrNames))
			}
			if tc.name == "sniffed port" || tc.name == "excluded domains" {
				return
			}
			// AppendDomainHashes agrees with the generated domains.
			var hs []uint64
			for _, d := range k.AppendDomainHashes(lrNames, nil) {
				hs = append(hs, d.Hash)
			}
			for i, d := range vh.Domains {
				if encode.VirtualHostDomainHash(d) != hs[i] {
					t.Errorf("hash of domain %d (%q) differs", i, d)
				}
			}
		})
	}
}

func TestVirtualHostDefaultRoute(t *testing.T) {
	r := newLRRows()
	vh := genVH(t, r.vhKey(r.svc("random-1.host.example", "default", index.OriginServiceEntry, []string{"240.240.0.1"}, httpP(80)), 80))
	if vh.Name != "random-1.host.example:80" || !vh.IncludeRequestAttemptCount || len(vh.Routes) != 1 {
		t.Fatalf("virtual host = %v", vh)
	}
	rt := vh.Routes[0]
	a := rt.GetRoute()
	if rt.Name != "default" || rt.GetMatch().GetPrefix() != "/" || a.GetCluster() != "outbound|80||random-1.host.example" {
		t.Errorf("route = %v", rt)
	}
	if a.GetTimeout().AsDuration() != 0 || a.GetMaxGrpcTimeout() == nil || a.GetMaxGrpcTimeout().AsDuration() != 0 {
		t.Errorf("timeouts = %v, %v; want 0s, 0s", a.GetTimeout(), a.GetMaxGrpcTimeout())
	}
	rp := a.GetRetryPolicy()
	if rp.GetRetryOn() != "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes" ||
		rp.GetNumRetries().GetValue() != 2 || rp.GetHostSelectionRetryMaxAttempts() != 5 ||
		len(rp.GetRetryHostPredicate()) != 1 || rp.GetRetryHostPredicate()[0].Name != "envoy.retry_host_predicates.previous_hosts" {
		t.Errorf("retry policy = %v", rp)
	}
	if rt.GetDecorator().GetOperation() != "random-1.host.example:80/*" {
		t.Errorf("decorator = %q", rt.GetDecorator().GetOperation())
	}
}

// TestVirtualHostKeyHash: hashing allocates nothing, and every input
// changes the hash.
func TestVirtualHostKeyHash(t *testing.T) {
	r := newLRRows()
	svc := r.svc("a.example", "default", index.OriginServiceEntry, []string{"10.0.0.1"}, httpP(80))
	vs := r.vs("a", "default", &networking.VirtualService{Hosts: []string{"a.example"}})
	base := func() *encode.VirtualHostKey {
		k := r.vhKey(svc, 80)
		k.VirtualService = vs
		return k
	}
	k := base()
	if n := testing.AllocsPerRun(100, func() { _ = k.Hash() }); n != 0 {
		t.Errorf("Hash allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = k.AppendDomainHashes(lrNames, make([]encode.DomainHash, 0, 16)[:0]) }); n > 1 {
		t.Errorf("AppendDomainHashes allocates %v times", n)
	}
	h0 := k.Hash()
	other := *svc
	other.Hash++
	otherVS := *vs
	otherVS.Hash++
	mutations := map[string]func(*encode.VirtualHostKey){
		"Type":           func(k *encode.VirtualHostKey) { k.Type = encode.ProxyGRPC },
		"Namespace":      func(k *encode.VirtualHostKey) { k.Namespace = "other" },
		"DomainSuffix":   func(k *encode.VirtualHostKey) { k.DomainSuffix = "example.org" },
		"Port":           func(k *encode.VirtualHostKey) { k.Port = 81 },
		"Service":        func(k *encode.VirtualHostKey) { k.Service = &other },
		"Host":           func(k *encode.VirtualHostKey) { k.Host = "x" },
		"VirtualService": func(k *encode.VirtualHostKey) { k.VirtualService = &otherVS },
		"Aliases":        func(k *encode.VirtualHostKey) { k.Aliases = []*index.Service{svc} },
		"Destinations":   func(k *encode.VirtualHostKey) { k.Destinations = []*index.Service{svc} },
		"Sniffed":        func(k *encode.VirtualHostKey) { k.Sniffed = true },
		"Exclude":        func(k *encode.VirtualHostKey) { k.Exclude = []uint64{1} },
	}
	for name, mut := range mutations {
		k := base()
		mut(k)
		if k.Hash() == h0 {
			t.Errorf("changing %s does not change the hash", name)
		}
	}
}
