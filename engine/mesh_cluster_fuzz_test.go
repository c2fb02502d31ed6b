package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// FuzzApplyClusterMesh: whatever mesh config it is given, applyClusterMesh
// refuses it with one of its sentinels or accepts it, never panics; and a
// mesh it accepts gives clusters, endpoints and listeners that pass
// Envoy's validation on the mesh-cluster-tls case's config (a gateway with
// TLS servers, a sidecar with inbound mTLS, DNS and EDS clusters).
func FuzzApplyClusterMesh(f *testing.F) {
	for _, name := range []string{"mesh-cluster", "mesh-cluster-distribute", "mesh-cluster-nolocality", "mesh-cluster-tls", "mesh-cluster-defaultpolicy"} {
		c, err := istiodref.LoadCase(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(c.Mesh))
	}
	f.Add("tcpKeepalive: {time: 0.5s, interval: 4294967295s}\ndnsRefreshRate: 0.0011s\nconnectTimeout: 3600s")
	f.Add("localityLbSetting: {distribute: [{from: '*', to: {'*': 100}}]}")
	f.Add("defaultTrafficPolicy: {connectionPool: {tcp: {tcpKeepalive: {probes: 1}}}, outlierDetection: {minHealthPercent: 100}}")
	c, err := istiodref.LoadCase("mesh-cluster-tls")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, y string) {
		cfg, err := inject.ParseMesh([]byte(y))
		if err != nil {
			return // not a mesh config: the reader's error, not ours
		}
		m := encode.DefaultMesh()
		if err := applyClusterMesh(m, cfg); err != nil {
			if !errors.Is(err, ErrBadMeshSetting) && !errors.Is(err, ErrUnsupportedMeshSetting) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		if testing.Short() {
			return
		}
		sm := scenario.NewMesh()
		if err := sm.Apply("config.yaml", c.Config); err != nil {
			t.Fatal(err)
		}
		e := New(sm.W, Options{Mesh: m})
		for _, p := range c.Proxies {
			md, err := structpb.NewStruct(p.Metadata)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			conn, err := e.Connect(ctx, &corev3.Node{Id: p.ID, Metadata: md}, "")
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			for _, typ := range []string{encode.ClusterType, encode.ListenerType} {
				rs, err := conn.Generate(typ, nil, true, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					var a anypb.Any
					if err := proto.Unmarshal(r.Any, &a); err != nil {
						t.Fatal(err)
					}
					msg, err := a.UnmarshalNew()
					if err != nil {
						t.Fatal(err)
					}
					if err := xdstest.Validate(msg); err != nil {
						t.Errorf("mesh config %q: %s %s: %v", y, typ, r.Name, err)
					}
				}
			}
			conn.Close()
			cancel()
		}
	})
}
