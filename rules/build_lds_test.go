package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// tcpBench mirrors istio-bench's tcp.yaml (tls.yaml with protocol TLS).
func tcpBench(proto index.Protocol) func(testing.TB, int) *index.Snapshot {
	return func(t testing.TB, n int) *index.Snapshot {
		f := newMeshFixture(t)
		f.kubeService("kubernetes", "default", "10.0.0.1", index.Port{Name: f.sym("https"), Number: 443, Protocol: index.ProtocolHTTPS})
		se := f.serviceEntry("proxy-service-instance", "default", []string{"example.com"}, nil, index.ResolutionClientSideLB, port(7070, proto))
		f.endpoints(se[0], "proxy-service-instance", nil, "1.1.1.1")
		for i := range n {
			f.serviceEntry(fmt.Sprint("service-", i), "default", []string{fmt.Sprintf("random-%d.host.example", i)},
				[]string{fmt.Sprintf("240.240.%d.%d", i/255, i%255)}, index.ResolutionClientSideLB, port(7070, proto))
		}
		return f.apply()
	}
}

// scopeFor returns a sidecar scope; with ip set, the proxy backs the
// ServiceEntry endpoints with that address (istio-bench's 1.1.1.1 proxy).
func scopeFor(snap *index.Snapshot, class *encode.ProxyClass, ip string) *Scope {
	sc := NewScope(snap, class)
	if ip == "" {
		return sc
	}
	sc.Instances = ComputeInstances(snap, &Node{Namespace: class.Namespace, IPs: []netip.Addr{netip.MustParseAddr(ip)}, Type: class.Type})
	return sc
}

// normalize re-encodes every Any inside m deterministically (after
// normalizing its content), so that proto.Equal compares content, and
// drops what pilotfish deliberately leaves out (HCM tracing).
func normalize(t testing.TB, m proto.Message) {
	t.Helper()
	normalizeReflect(t, m.ProtoReflect())
}

func normalizeReflect(t testing.TB, m protoreflect.Message) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return // a type this binary does not know: compare bytes
		}
		if h, ok := inner.(*hcm.HttpConnectionManager); ok {
			h.Tracing = nil
		}
		normalizeReflect(t, inner.ProtoReflect())
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
		if err != nil {
			t.Fatal(err)
		}
		a.Value = b
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				normalizeReflect(t, v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				normalizeReflect(t, mv.Message())
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			normalizeReflect(t, v.Message())
		}
		return true
	})
}

func buildListenersFor(t testing.TB, sc *Scope, names ...string) map[string]Resource {
	t.Helper()
	rs, err := buildListeners(sc, encode.DefaultMesh(), verifyCache(), names, len(names) == 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Resource{}
	for _, r := range rs {
		if _, dup := out[r.Name]; dup {
			t.Errorf("duplicate listener %s", r.Name)
		}
		out[r.Name] = r
	}
	return out
}

// TestListenersMatchIstiod compares every listener with istiod's for the
// same workload and proxy (istiod-output/*.s10.sidecar*.json), field for
// field except HCM tracing, which pilotfish leaves to telemetry config.
func TestListenersMatchIstiod(t *testing.T) {
	tests := []struct {
		name, file, ip string
		snap           func(testing.TB, int) *index.Snapshot
	}{
		{"http", "http.s10.sidecar.json", "", httpBench},
		{"http 1.1.1.1", "http.s10.sidecar-1.1.1.1.json", "1.1.1.1", httpBench},
		{"virtualservice", "virtualservice.s10.sidecar.json", "", vsBench},
		{"virtualservice 1.1.1.1", "virtualservice.s10.sidecar-1.1.1.1.json", "1.1.1.1", vsBench},
		{"tcp", "tcp.s10.sidecar.json", "", tcpBench(index.ProtocolTCP)},
		{"tcp 1.1.1.1", "tcp.s10.sidecar-1.1.1.1.json", "1.1.1.1", tcpBench(index.ProtocolTCP)},
		{"tls", "tls.s10.sidecar.json", "", tcpBench(index.ProtocolTLS)},
		{"tls 1.1.1.1", "tls.s10.sidecar-1.1.1.1.json", "1.1.1.1", tcpBench(index.ProtocolTLS)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := istiodListeners(t, tc.file)
			got := buildListenersFor(t, scopeFor(tc.snap(t, 10), sidecarClass("default"), tc.ip))
			var gotNames, wantNames []string
			for n := range got {
				gotNames = append(gotNames, n)
			}
			for n := range want {
				wantNames = append(wantNames, n)
			}
			slices.Sort(gotNames)
			slices.Sort(wantNames)
			if !slices.Equal(gotNames, wantNames) {
				t.Fatalf("listeners = %v\nistiod     %v", gotNames, wantNames)
			}
			for _, n := range wantNames {
				g := decodeListeners(t, []Resource{got[n]})[0]
				validate(t, g)
				w := want[n]
				normalize(t, g)
				normalize(t, w)
				if d := protoDiff(t, w, g); d != "" {
					t.Errorf("listener %s differs from istiod's (-istiod +pilotfish):\n%s", n, d)
				}
			}
		})
	}
}
