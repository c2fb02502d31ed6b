package encode_test

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestTransientStoresNothing: the transient view answers like the cache
// (same name, version and bytes) but keeps nothing, and its entries say so
// with Digest 0; in verify mode the direct encoding is still checked.
func TestTransientStoresNothing(t *testing.T) {
	cache := encode.NewCache()
	cache.SetVerify(true)
	k := &encode.EndpointsKey{ClusterName: "outbound|80||made-up.example"}
	for i := range 3 {
		e, err := encode.Resource(cache.Transient(), index.Names{}, k, encode.EndpointsGen)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name != k.ClusterName || e.Digest != 0 || len(e.Bytes) == 0 {
			t.Fatalf("transient entry %d: name %q digest %x, %d bytes", i, e.Name, e.Digest, len(e.Bytes))
		}
		if n := cache.Len(); n != 0 {
			t.Fatalf("the cache holds %d entries after a transient answer", n)
		}
		cached, err := encode.Resource(cache, index.Names{}, k, encode.EndpointsGen)
		if err != nil {
			t.Fatal(err)
		}
		if cached.Version != e.Version || string(cached.Bytes) != string(e.Bytes) || cached.Digest == 0 {
			t.Fatalf("cached entry differs from the transient one: version %s vs %s", cached.Version, e.Version)
		}
		if cache.Transient().Transient() != cache.Transient() {
			t.Fatal("the transient view of a transient view is another view")
		}
		cache = encode.NewCache()
		cache.SetVerify(true)
	}
}
