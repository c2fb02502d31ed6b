package encode

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// leakyKey is a deliberately broken key: its generator reads Timeout, which
// Hash leaves out. (Only this package can define keys and generators, so
// the test lives in it.)
type leakyKey struct {
	ClusterKey
	Timeout int64
}

func (k *leakyKey) Hash() uint64 { return k.ClusterKey.Hash() }
func (*leakyKey) key()           {}

var leakyGen = resourceGen(KindCluster, ClusterType, func(n index.Names, k *leakyKey) (string, proto.Message) {
	name, m := Cluster(n, &k.ClusterKey)
	c := m.(*clusterv3.Cluster)
	c.ConnectTimeout = &durationpb.Duration{Seconds: k.Timeout} // a new one: the default is shared
	return name, c
})

// TestVerifyCatchesUndeclaredInput: with verify mode on, a cache hit whose
// fresh generation differs from the cached bytes panics, naming the key.
func TestVerifyCatchesUndeclaredInput(t *testing.T) {
	n := index.NamesOf(index.NewSymbols(), nil)
	cache := NewCache()
	cache.SetVerify(true)
	k := &leakyKey{ClusterKey: ClusterKey{Role: ClusterBlackHole, Mesh: DefaultMesh()}, Timeout: 1}
	if _, err := Resource(cache, n, k, leakyGen); err != nil {
		t.Fatal(err)
	}
	// Same declared inputs, same output: a verified hit.
	if _, err := Resource(cache, n, k, leakyGen); err != nil {
		t.Fatal(err)
	}
	k.Timeout = 2 // an input the key does not declare
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("verify mode did not catch a generator reading an undeclared input")
		}
		if msg, _ := r.(string); !strings.Contains(msg, "its key misses an input") {
			t.Fatalf("unexpected panic: %v", r)
		}
	}()
	_, _ = Resource(cache, n, k, leakyGen)
}
