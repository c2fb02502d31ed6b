package ingest

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// apply decodes docs, converts every object and applies them as one batch.
func apply(t *testing.T, w *index.Writer, c *Converter, docs string) *index.ChangeSet {
	t.Helper()
	objs, errs := Decode("test.yaml", []byte(docs))
	if len(errs) > 0 {
		t.Fatalf("decode: %v", errs)
	}
	var b index.Batch
	for i := range objs {
		if verrs := Validate(&objs[i]); len(verrs) > 0 {
			t.Fatalf("validate: %v", verrs)
		}
		c.Put(&b, &objs[i])
	}
	return w.Apply(&b)
}

func TestConvertServices(t *testing.T) {
	for _, tc := range []struct {
		name  string
		doc   string
		host  string
		check func(*testing.T, *index.Snapshot, *index.Service)
	}{
		{
			name: "headless is passthrough",
			doc:  "apiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: data}\nspec:\n  clusterIP: None\n  ports: [{name: tcp-db, port: 5432}]\n",
			host: "db.data.svc.cluster.local",
			check: func(t *testing.T, _ *index.Snapshot, s *index.Service) {
				if s.Resolution != index.ResolutionPassthrough || len(s.Addresses) != 0 || s.Ports[0].Protocol != index.ProtocolTCP {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name: "external name resolves by DNS",
			doc:  "apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: data}\nspec:\n  type: ExternalName\n  externalName: db.example.com\n  ports: [{name: https, port: 443}]\n",
			host: "ext.data.svc.cluster.local",
			check: func(t *testing.T, snap *index.Snapshot, s *index.Service) {
				if s.Resolution != index.ResolutionDNS || snap.String(s.ExternalName) != "db.example.com" || s.Ports[0].Protocol != index.ProtocolHTTPS {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name: "appProtocol wins over the port name",
			doc:  "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: data, annotations: {networking.istio.io/exportTo: \".\"}}\nspec:\n  clusterIP: 10.0.0.3\n  ports: [{name: web, port: 80, appProtocol: grpc}, {name: grpc-web-x, port: 81}, {name: h2, port: 82, appProtocol: kubernetes.io/h2c}]\n",
			host: "api.data.svc.cluster.local",
			check: func(t *testing.T, _ *index.Snapshot, s *index.Service) {
				want := []index.Protocol{index.ProtocolGRPC, index.ProtocolGRPCWeb, index.ProtocolHTTP2}
				for i, p := range s.Ports {
					if p.Protocol != want[i] {
						t.Fatalf("port %d protocol %v, want %v", p.Number, p.Protocol, want[i])
					}
				}
				if !s.ExportTo.Private || s.ExportTo.VisibleTo(s.Key.Namespace, 0) {
					t.Fatalf("exportTo annotation not applied: %+v", s.ExportTo)
				}
			},
		},
		{
			name: "DNS ServiceEntry endpoint hostnames",
			doc:  "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ext, namespace: data}\nspec:\n  hosts: [api.example.com]\n  location: MESH_EXTERNAL\n  ports: [{number: 443, name: tls, protocol: TLS}]\n  resolution: DNS\n  endpoints: [{address: a.example.com}, {address: b.example.com, weight: 3}]\n",
			host: "api.example.com",
			check: func(t *testing.T, snap *index.Snapshot, s *index.Service) {
				if s.Resolution != index.ResolutionDNS || !s.MeshExternal {
					t.Fatalf("%+v", s)
				}
				eps := snap.Endpoints(s.Key).Groups[0].Endpoints
				if snap.String(eps[0].Hostname) != "a.example.com" || eps[0].Addr.IsValid() || eps[1].Weight != 3 {
					t.Fatalf("endpoints %+v", eps)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := index.NewWriter()
			c := NewConverter(w, "cluster.local")
			apply(t, w, c, tc.doc)
			snap := w.Snapshot()
			ids := snap.ServicesByHost(w.Symbols().Intern(tc.host))
			if len(ids) != 1 {
				t.Fatalf("%d services for %s", len(ids), tc.host)
			}
			tc.check(t, snap, snap.ServiceByID(ids[0]))
		})
	}
}

func TestConvertConfigHosts(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	apply(t, w, c, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews, reviews.other.svc.cluster.local, "*.example.com"]
  http: [{route: [{destination: {host: reviews}}]}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  subsets: [{name: v1, labels: {version: v1}}]
`)
	snap := w.Snapshot()
	for _, tc := range []struct {
		kind index.ConfigKind
		host string
	}{
		{index.ConfigVirtualService, "reviews.shop.svc.cluster.local"},
		{index.ConfigVirtualService, "reviews.other.svc.cluster.local"},
		{index.ConfigVirtualService, "*.example.com"},
		{index.ConfigDestinationRule, "reviews.shop.svc.cluster.local"},
	} {
		n := 0
		snap.ConfigsByHost(tc.kind, w.Symbols().Intern(tc.host), func(*index.Config) bool { n++; return true })
		if n != 1 {
			t.Errorf("%v by host %s: %d configs, want 1", tc.kind, tc.host, n)
		}
	}
}

func TestConvertDeleteRetiresEveryRow(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	apply(t, w, c, testSE)
	if w.Snapshot().NumServices() != 2 || w.Snapshot().NumConfigs(index.ConfigServiceEntry) != 1 {
		t.Fatal("ServiceEntry not applied")
	}
	var b index.Batch
	c.Delete(&b, ObjectKey{Kind: KindServiceEntry, Namespace: "shop", Name: "external"})
	w.Apply(&b)
	snap := w.Snapshot()
	if snap.NumServices() != 0 || snap.NumEndpointShards() != 0 || snap.NumConfigs(index.ConfigServiceEntry) != 0 {
		t.Fatalf("after delete: %d services, %d shards, %d configs", snap.NumServices(), snap.NumEndpointShards(), snap.NumConfigs(index.ConfigServiceEntry))
	}
	if c.Known(ObjectKey{Kind: KindServiceEntry, Namespace: "shop", Name: "external"}) {
		t.Fatal("converter still tracks a deleted object")
	}
}
