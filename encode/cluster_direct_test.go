package encode_test

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// directClusterKeys are outbound keys the direct encoder accepts, over
// every input it reads: service origin and exposure, port protocol, proxy
// type, mTLS mode and service accounts, mesh settings, and hosts long
// enough that nested lengths take two bytes.
func directClusterKeys(t *testing.T) (index.Names, []*encode.ClusterKey) {
	f := newFixture(t)
	long := strings.Repeat("a", 150) + ".example"
	protocols := []index.Protocol{index.ProtocolHTTP, index.ProtocolHTTP2, index.ProtocolGRPC, index.ProtocolGRPCWeb, index.ProtocolTCP, index.ProtocolUnknown, index.ProtocolTLS}
	var ports []index.Port
	for i, p := range protocols {
		ports = append(ports, f.port("p"+string(rune('a'+i)), uint32(8000+i), p))
	}
	se := f.serviceEntry("random-0.host.example", "default", "service-0", ports...)
	seLong := f.serviceEntry(long, "default", long, ports[0])
	external := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("api.external.example"), Namespace: f.sym("default")}, Name: f.sym("api"),
		Origin: index.OriginServiceEntry, MeshExternal: true, Ports: ports,
	})
	kube := f.kubeService("reviews", "shop", ports...)
	headlessRouter := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("db.shop.svc.cluster.local"), Namespace: f.sym("shop")}, Name: f.sym("db"),
		Origin: index.OriginKubernetes, Resolution: index.ResolutionPassthrough, Ports: ports[:1],
	})
	f.apply()
	// Not in string order: the SANs are sorted as strings.
	sas := []index.Sym{f.sym("zeta"), f.sym("default"), f.sym("bookinfo-reviews")}
	meshes := []*encode.Mesh{encode.DefaultMesh(), func() *encode.Mesh {
		m := encode.DefaultMesh()
		m.ConnectTimeout = 2500 * time.Millisecond
		m.TrustDomain = "example.org"
		m.EnableAutoMTLS = false
		return m
	}(), func() *encode.Mesh {
		m := encode.DefaultMesh()
		m.ConnectTimeout = 3 * time.Second
		m.TrustDomain = "example.org"
		return m
	}(), func() *encode.Mesh {
		// meshConfig h2UpgradePolicy and tcpKeepalive (mesh_cluster.go).
		m := encode.DefaultMesh()
		m.H2Upgrade = true
		m.TCPKeepalive = &encode.TCPKeepalive{Probes: 3, Time: 600, HasTime: true}
		return m
	}(), func() *encode.Mesh {
		m := encode.DefaultMesh()
		m.TCPKeepalive = &encode.TCPKeepalive{HasInterval: true}
		m.EnableAutoMTLS = false
		return m
	}(), func() *encode.Mesh {
		m := encode.DefaultMesh()
		m.TCPKeepalive = &encode.TCPKeepalive{Probes: 300, Interval: 1 << 31, HasInterval: true}
		return m
	}(), func() *encode.Mesh {
		m := encode.DefaultMesh()
		m.TCPKeepalive = &encode.TCPKeepalive{}
		return m
	}(), func() *encode.Mesh {
		// Aliases sort around the trust domain ("a" before "cluster.local",
		// "cluster.local.x" after), one equal to it.
		m := encode.DefaultMesh()
		m.TrustDomainAliases = []string{"cluster.local.x", "a", "cluster.local"}
		return m
	}(), nil}
	var keys []*encode.ClusterKey
	for _, svc := range []index.ServiceKey{se, seLong, external, kube, headlessRouter} {
		s := f.svc(svc)
		for _, port := range s.Ports {
			for _, pt := range []encode.ProxyType{encode.ProxySidecar, encode.ProxyRouter} {
				for _, mtls := range []encode.ServiceMTLS{encode.ServiceMTLSUnknown, encode.ServiceMTLSDisable, encode.ServiceMTLSPermissive, encode.ServiceMTLSStrict} {
					for _, mesh := range meshes {
						for _, sa := range [][]index.Sym{nil, sas} {
							k := f.clusterKey(svc)
							k.Port, k.ProxyType, k.MTLS, k.Mesh, k.ServiceAccounts = port, pt, mtls, mesh, sa
							k.IPv6 = mtls == encode.ServiceMTLSStrict
							if encode.ClusterDirect(k) {
								keys = append(keys, k)
							}
						}
					}
				}
			}
		}
	}
	return f.names(), keys
}

// TestAppendClusterMatchesReference: for every input the direct encoder
// reads, its cluster is the message [encode.Cluster] builds.
func TestAppendClusterMatchesReference(t *testing.T) {
	names, keys := directClusterKeys(t)
	if len(keys) < 500 {
		t.Fatalf("only %d direct keys", len(keys))
	}
	prefix := protowire.AppendTag(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), typeCluster), 2, protowire.BytesType)
	for _, k := range keys {
		name, b := encode.AppendCluster(prefix, names, k)
		var a anypb.Any
		if err := proto.Unmarshal(b, &a); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := &clusterv3.Cluster{}
		if err := a.UnmarshalTo(got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		refName, ref := encode.Cluster(names, k)
		if name != refName || !proto.Equal(got, ref) {
			t.Fatalf("%s (reference %s), key %+v:\ndirect:    %s\nreference: %s", name, refName, k, protojson.Format(got), protojson.Format(ref))
		}
		mustValidate(t, got)
	}
}

// TestClusterDirectScope: keys with a DestinationRule, a subset, DNS or
// ORIGINAL_DST resolution, proxyless gRPC or another role are left to the
// reference generator.
func TestClusterDirectScope(t *testing.T) {
	f := newFixture(t)
	dns := f.service(index.Service{Key: index.ServiceKey{Host: f.sym("dns.example"), Namespace: f.sym("default")},
		Origin: index.OriginServiceEntry, Resolution: index.ResolutionDNS, Ports: []index.Port{f.port("http", 80, index.ProtocolHTTP)}})
	passthrough := f.service(index.Service{Key: index.ServiceKey{Host: f.sym("db.shop.svc.cluster.local"), Namespace: f.sym("shop")},
		Origin: index.OriginKubernetes, Resolution: index.ResolutionPassthrough, Ports: []index.Port{f.port("tcp", 5432, index.ProtocolTCP)}})
	svc := meshSvc(f)
	f.apply()
	base := f.clusterKey(svc)
	if !encode.ClusterDirect(base) {
		t.Fatal("a sidecar's outbound EDS cluster without a DestinationRule is not encoded directly")
	}
	cases := map[string]func(k *encode.ClusterKey){
		"destination rule": func(k *encode.ClusterKey) { k.DestinationRule = &index.Config{} },
		"subset":           func(k *encode.ClusterKey) { k.Subset = "v1" },
		"dns":              func(k *encode.ClusterKey) { k.Service = f.svc(dns) },
		"original dst":     func(k *encode.ClusterKey) { k.Service = f.svc(passthrough) },
		"grpc":             func(k *encode.ClusterKey) { k.ProxyType = encode.ProxyGRPC },
		"inbound":          func(k *encode.ClusterKey) { k.Role = encode.ClusterInbound },
		"sni-dnat":         func(k *encode.ClusterKey) { k.Role = encode.ClusterSNIDNAT },
		"mesh default traffic policy": func(k *encode.ClusterKey) {
			k.Mesh = encode.DefaultMesh()
			k.Mesh.DefaultTrafficPolicy = "\x1a\x00" // outlierDetection {}
		},
		"mesh locality distribution": func(k *encode.ClusterKey) {
			k.Mesh = encode.DefaultMesh()
			k.Mesh.LocalityLB = &encode.LocalityLB{Distribute: []encode.LocalityDistribute{{From: "a", To: []encode.LocalityWeight{{Locality: "a", Weight: 100}}}}}
		},
	}
	for name, change := range cases {
		k := *base
		change(&k)
		if encode.ClusterDirect(&k) {
			t.Errorf("%s: encoded directly", name)
		}
	}
}

// BenchmarkAppendClusterMesh: the direct encoding of an HTTP cluster with
// istiod's default mesh, and with a mesh that upgrades to HTTP/2 and sets
// tcpKeepalive (whose upstream_connection_options is marshaled per
// cluster).
func BenchmarkAppendClusterMesh(b *testing.B) {
	f := newFixture(b)
	svc := meshSvc(f)
	f.apply()
	custom := encode.DefaultMesh()
	custom.H2Upgrade = true
	custom.TCPKeepalive = &encode.TCPKeepalive{Probes: 4, Time: 600, HasTime: true}
	for _, m := range []struct {
		name string
		mesh *encode.Mesh
	}{{"default", encode.DefaultMesh()}, {"h2-keepalive", custom}} {
		b.Run(m.name, func(b *testing.B) {
			k := f.clusterKey(svc)
			k.Mesh = m.mesh
			if !encode.ClusterDirect(k) {
				b.Fatal("not encoded directly")
			}
			b.ReportAllocs()
			for b.Loop() {
				encode.AppendCluster(nil, f.names(), k)
			}
		})
	}
}
