package encode_test

import (
	"net/netip"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

type nameInfo struct {
	ips                            []string
	registry, shortname, namespace string
}

// decodeNameTable reads an Any-encoded NameTable with the locally defined
// descriptor, as istio-agent would with its generated type.
func decodeNameTable(t *testing.T, anyBytes []byte) map[string]nameInfo {
	t.Helper()
	var typeURL string
	var value []byte
	for b := anyBytes; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		v, m := protowire.ConsumeBytes(b)
		if n < 0 || m < 0 || typ != protowire.BytesType {
			t.Fatalf("bad Any encoding")
		}
		b = b[m:]
		switch num {
		case 1:
			typeURL = string(v)
		case 2:
			value = v
		}
	}
	if typeURL != encode.NameTableType {
		t.Fatalf("type URL %q", typeURL)
	}
	md := encode.NameTableDescriptor()
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(value, m); err != nil {
		t.Fatal(err)
	}
	out := map[string]nameInfo{}
	m.Get(md.Fields().ByName("table")).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		info := v.Message()
		f := info.Descriptor().Fields()
		var ni nameInfo
		l := info.Get(f.ByName("ips")).List()
		for i := range l.Len() {
			ni.ips = append(ni.ips, l.Get(i).String())
		}
		ni.registry = info.Get(f.ByName("registry")).String()
		ni.shortname = info.Get(f.ByName("shortname")).String()
		ni.namespace = info.Get(f.ByName("namespace")).String()
		out[k.String()] = ni
		return true
	})
	return out
}

func TestNameTable(t *testing.T) {
	syms := index.NewSymbols()
	ns := syms.Intern("shop")
	kube := &index.Service{
		Key: index.ServiceKey{Host: syms.Intern("cart.shop.svc.cluster.local"), Namespace: ns}, Name: syms.Intern("cart"),
		Origin: index.OriginKubernetes, Addresses: []netip.Prefix{netip.MustParsePrefix("10.96.0.7/32")},
	}
	headless := &index.Service{
		Key: index.ServiceKey{Host: syms.Intern("db.shop.svc.cluster.local"), Namespace: ns}, Name: syms.Intern("db"),
		Origin: index.OriginKubernetes, Resolution: index.ResolutionPassthrough,
	}
	se := &index.Service{
		Key: index.ServiceKey{Host: syms.Intern("api.example.com"), Namespace: ns}, Origin: index.OriginServiceEntry,
		Addresses: []netip.Prefix{netip.MustParsePrefix("240.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/16")},
	}
	noVIP := &index.Service{Key: index.ServiceKey{Host: syms.Intern("dns.example.com"), Namespace: ns}, Origin: index.OriginServiceEntry, Resolution: index.ResolutionDNS}
	shard := &index.EndpointShard{Groups: []index.EndpointGroup{{Endpoints: []index.Endpoint{
		{Addr: netip.MustParseAddr("10.244.0.5")},
		{Addr: netip.MustParseAddr("10.244.0.6"), Health: index.HealthUnhealthy},
		{Addr: netip.MustParseAddr("10.244.0.7")},
	}}}}
	n := index.NamesOf(syms, nil)
	k := &encode.NameTableKey{Services: []*index.Service{se, kube, headless, noVIP}, Headless: []*index.EndpointShard{nil, nil, shard, nil}}
	c := encode.NewCache()
	c.SetVerify(true) // the hand encoding is checked against the dynamic message
	e, err := encode.Resource(c, n, k, encode.NameTableGen)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeNameTable(t, e.Bytes)
	want := map[string]nameInfo{
		"cart.shop.svc.cluster.local": {ips: []string{"10.96.0.7"}, registry: "Kubernetes", shortname: "cart", namespace: "shop"},
		"db.shop.svc.cluster.local":   {ips: []string{"10.244.0.5", "10.244.0.7"}, registry: "Kubernetes", shortname: "db", namespace: "shop"},
		// A CIDR is no address a name resolves to; a service without
		// any is left out.
		"api.example.com": {ips: []string{"240.0.0.1"}, registry: "External"},
	}
	if len(got) != len(want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	for h, w := range want {
		g, ok := got[h]
		if !ok || !slices.Equal(g.ips, w.ips) || g.registry != w.registry || g.shortname != w.shortname || g.namespace != w.namespace {
			t.Errorf("%s: %+v, want %+v", h, g, w)
		}
	}
	// Deterministic: the same key encodes to the same bytes, and the hand
	// encoding equals a deterministic marshal of the reference message.
	_, ref := encode.NameTable(n, k)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	// AppendNameTable writes a length-delimited value: the size, then the message.
	wantBody := protowire.AppendBytes(nil, b)
	if _, body := encode.AppendNameTable(nil, n, k); string(body) != string(wantBody) {
		t.Errorf("hand encoding differs from the deterministic marshal of the reference message")
	}
}
