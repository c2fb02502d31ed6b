package encode

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHasherHashesItsFieldBytes: whatever the buffering, a Hasher's sum is
// xxhash of its fields' bytes in order (little-endian values of 8, 4 or 1
// bytes, strings after their length), short keys and keys past the buffer alike, and Sum leaves
// the hasher usable.
func TestHasherHashesItsFieldBytes(t *testing.T) {
	long := strings.Repeat("x", 3*hasherBufLen+5)
	for _, n := range []int{0, 1, 7, 31, 32, 33, 100} {
		h := NewHasher("tag")
		want := binary.LittleEndian.AppendUint64(nil, 3)
		want = append(want, "tag"...)
		for i := range n {
			h.U64(uint64(i))
			want = binary.LittleEndian.AppendUint64(want, uint64(i))
			h.U32(uint32(i) + 1)
			want = binary.LittleEndian.AppendUint32(want, uint32(i)+1)
			h.Bool(i%2 == 0)
			want = append(want, byte(1-i%2))
			s := long[:i*i%len(long)]
			h.Str(s)
			want = binary.LittleEndian.AppendUint64(want, uint64(len(s)))
			want = append(want, s...)
			if got := h.Sum(); got != xxhash.Sum64(want) {
				t.Fatalf("%d fields, after field %d: sum %x, want %x", n, i, got, xxhash.Sum64(want))
			}
		}
		if got := h.Sum(); got != xxhash.Sum64(want) {
			t.Fatalf("%d fields: sum %x, want %x", n, got, xxhash.Sum64(want))
		}
	}
}

func BenchmarkClusterKeyHash(b *testing.B) {
	k := &ClusterKey{Mesh: DefaultMesh(), Subset: "v1", Locality: "us-west1/us-west1-a", ClusterID: "Kubernetes"}
	b.ReportAllocs()
	for b.Loop() {
		k.Hash()
	}
}
