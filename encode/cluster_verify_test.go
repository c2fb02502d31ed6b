package encode_test

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// leakyKey is a deliberately broken key: its generator reads Timeout, which
// Hash leaves out.
type leakyKey struct {
	encode.ClusterKey
	Timeout int64
}

func (k *leakyKey) Hash() uint64 { return k.ClusterKey.Hash() }

func leakyCluster(k *leakyKey) (string, proto.Message) {
	name, m := encode.Cluster(&k.ClusterKey)
	c := m.(*clusterv3.Cluster)
	c.ConnectTimeout.Seconds = k.Timeout
	return name, c
}

// TestVerifyCatchesUndeclaredInput: with verify mode on, a cache hit whose
// fresh generation differs from the cached bytes panics, naming the key.
func TestVerifyCatchesUndeclaredInput(t *testing.T) {
	f := newFixture(t)
	f.apply()
	cache := encode.NewCache()
	cache.SetVerify(true)
	k := &leakyKey{ClusterKey: encode.ClusterKey{Role: encode.ClusterBlackHole, Mesh: encode.DefaultMesh(), Syms: f.snap.Symbols}, Timeout: 1}
	if _, err := encode.Resource(cache, encode.KindCluster, typeCluster, k, leakyCluster); err != nil {
		t.Fatal(err)
	}
	// Same declared inputs, same output: a verified hit.
	if _, err := encode.Resource(cache, encode.KindCluster, typeCluster, k, leakyCluster); err != nil {
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
	_, _ = encode.Resource(cache, encode.KindCluster, typeCluster, k, leakyCluster)
}
