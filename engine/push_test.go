package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

func TestPushMerge(t *testing.T) {
	eds := func(reason string, clusters ...string) engine.Push {
		return engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: clusters, Reason: reason}
	}
	tests := []struct {
		name string
		a, b engine.Push
		want engine.Push
	}{
		{"full wins", eds("endpoint", "a"), engine.Push{Full: true, Reason: "config"},
			engine.Push{Full: true, Reason: "endpoint,config"}},
		{"full then partial", engine.Push{Full: true, Reason: "config"}, eds("endpoint", "a"),
			engine.Push{Full: true, Reason: "config,endpoint"}},
		{"endpoint union", eds("endpoint", "a", "b"), eds("endpoint", "b", "c"),
			eds("endpoint", "a", "b", "c")},
		{"endpoint all wins", eds("endpoint", "a"), eds("endpoint"),
			engine.Push{Types: []string{engine.TypeEndpoint}, Reason: "endpoint"}},
		{"empty then endpoint", engine.Push{}, eds("endpoint", "a"), eds("endpoint", "a")},
		{"types union drops endpoints",
			eds("endpoint", "a"), engine.Push{Types: []string{engine.TypeCluster}, Reason: "config"},
			engine.Push{Types: []string{engine.TypeEndpoint, engine.TypeCluster}, Reason: "endpoint,config"}},
		{"repeated reason kept short",
			engine.Push{Types: []string{engine.TypeRoute}, Reason: "config,endpoint"},
			engine.Push{Types: []string{engine.TypeRoute, engine.TypeListener}, Reason: "endpoint"},
			engine.Push{Types: []string{engine.TypeRoute, engine.TypeListener}, Reason: "config,endpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.Merge(tc.b)
			if got.Full != tc.want.Full || got.Reason != tc.want.Reason ||
				!slices.Equal(got.Types, tc.want.Types) || !slices.Equal(got.Endpoints, tc.want.Endpoints) ||
				(got.Endpoints == nil) != (tc.want.Endpoints == nil) {
				t.Errorf("Merge = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPushMergeDoesNotAlias checks that merging never writes into an input's
// backing array: pushes are shared between connections.
func TestPushMergeDoesNotAlias(t *testing.T) {
	backing := make([]string, 1, 8)
	backing[0] = "a"
	a := engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: backing}
	_ = a.Merge(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"b"}})
	if got := backing[:2]; got[1] != "" {
		t.Fatalf("Merge wrote into the input's spare capacity: %q", got)
	}
}

// TestPushMergeLarge exercises the set path: merging two large endpoint lists
// stays exact.
func TestPushMergeLarge(t *testing.T) {
	var a, b []string
	for i := range 1000 {
		a = append(a, fmt.Sprint("c", i))
		b = append(b, fmt.Sprint("c", i+500))
	}
	got := engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: a}.
		Merge(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: b})
	if len(got.Endpoints) != 1500 || got.Endpoints[0] != "c0" || got.Endpoints[1499] != "c1499" {
		t.Fatalf("got %d endpoints, first %q last %q", len(got.Endpoints), got.Endpoints[0], got.Endpoints[len(got.Endpoints)-1])
	}
}
