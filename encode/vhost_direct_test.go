package encode

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestDirectVirtualHostBytes: the direct encoder writes, for every
// default virtual host, the bytes the reference generator's message
// encodes to, and the same name; other keys take the reference path.
// Keys vary everything the default virtual host reads: proxy type,
// namespace (short names), origin, headless resolution, addresses (IPv4,
// IPv6, CIDR), aliases, excluded domains, long hostnames (two-byte
// lengths), the mesh retry policy and the port.
func TestDirectVirtualHostBytes(t *testing.T) {
	w := index.NewWriter()
	n := w.Names()
	rng := rand.New(rand.NewPCG(1, 2))
	svc := func(host, ns string, origin index.Origin, res index.Resolution, addrs ...string) *index.Service {
		s := &index.Service{Key: index.ServiceKey{Host: w.Symbols().Intern(host), Namespace: w.Symbols().Intern(ns)},
			Origin: origin, Resolution: res, Hash: uint64(len(host))}
		for _, a := range addrs {
			s.Addresses = append(s.Addresses, netip.MustParsePrefix(a))
		}
		return s
	}
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + ".ns.svc.cluster.local"
	services := []*index.Service{
		svc("reviews.default.svc.cluster.local", "default", index.OriginKubernetes, 0, "10.0.0.1/32"),
		svc("ratings.other.svc.cluster.local", "other", index.OriginKubernetes, 0, "10.0.0.2/32", "fd00::2/128"),
		svc("db.default.svc.cluster.local", "default", index.OriginKubernetes, index.ResolutionPassthrough),
		svc("api.example.com", "default", index.OriginServiceEntry, 0, "192.168.0.0/16"),
		svc(long, "ns", index.OriginKubernetes, 0, "10.0.0.3/32"),
	}
	retries := []HTTPRetry{
		{},
		{Set: true, Attempts: 0},
		{Set: true, Attempts: 3, RetryOn: "5xx,gateway-error,503", PerTryTimeout: 2 * time.Second, HasPerTryTimeout: true,
			HasIgnorePreviousHosts: true, RetryRemoteLocalities: true, Backoff: 25 * time.Millisecond, HasBackoff: true},
	}
	direct := 0
	for i := range 400 {
		s := services[rng.IntN(len(services))]
		k := &VirtualHostKey{
			Type:         []ProxyType{ProxySidecar, ProxyGRPC}[rng.IntN(2)],
			Namespace:    []string{"default", "other", "ns"}[rng.IntN(3)],
			DomainSuffix: "cluster.local",
			Port:         []uint32{80, 9080, 15010}[rng.IntN(3)],
			Service:      s,
			Retry:        retries[rng.IntN(len(retries))],
		}
		if rng.IntN(3) == 0 {
			k.Aliases = []*index.Service{services[rng.IntN(len(services))]}
		}
		if rng.IntN(3) == 0 {
			var hs []DomainHash
			hs = k.AppendDomainHashes(n, hs)
			for _, h := range hs {
				if rng.IntN(2) == 0 {
					k.Exclude = append(k.Exclude, h.Hash)
				}
			}
		}
		if rng.IntN(10) == 0 {
			k.Sniffed = true
		}
		if k.takesDefaultRoute(n) {
			direct++
		}
		name, b, err := appendVirtualHost(n, k)
		if err != nil {
			t.Fatal(err)
		}
		refName, msg := VirtualHost(n, k)
		rb, err := marshalBare(msg)
		if err != nil {
			t.Fatal(err)
		}
		same := bytes.Equal(b, rb)
		if _, vt := msg.(vtMarshaler); !vt {
			// proto.Marshal orders oneof fields last, vtprotobuf (the
			// build's encoder) by number: compare messages.
			got := &route.VirtualHost{}
			same = proto.Unmarshal(b, got) == nil && proto.Equal(got, msg)
		}
		if name != refName || !same {
			t.Fatalf("key %d (%s, %+v): direct %q\n%x\nreference %q\n%x", i, n.String(s.Key.Host), k.Retry, name, b, refName, rb)
		}
	}
	if direct < 300 {
		t.Errorf("%d of 400 keys took the direct path, want most", direct)
	}
}

// TestAppendLenPrefixed: a value written after a one-byte length
// reservation is length-prefixed as protowire.AppendBytes writes it.
func TestAppendLenPrefixed(t *testing.T) {
	for _, l := range []int{0, 1, 127, 128, 200, 16383, 16384, 70000} {
		v := bytes.Repeat([]byte{'x'}, l)
		got := appendLenPrefixed([]byte("pre"), func(b []byte) []byte { return append(b, v...) })
		want := protowire.AppendBytes([]byte("pre"), v)
		if !bytes.Equal(got, want) {
			t.Errorf("length %d: %d bytes, want %d", l, len(got), len(want))
		}
	}
}
