package encode

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestCloseLen2: a value written after a two-byte length reservation ends
// up length-prefixed exactly as protowire.AppendBytes writes it, whether its
// length takes one, two or three bytes.
func TestCloseLen2(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 70000} {
		value := bytes.Repeat([]byte{0xab}, n)
		dst := []byte("prefix")
		at := cdOpenLen2(&dst)
		dst = append(dst, value...)
		dst = cdCloseLen2(dst, at)
		want := protowire.AppendBytes([]byte("prefix"), value)
		if !bytes.Equal(dst, want) {
			t.Errorf("length %d: got %d bytes, want %d", n, len(dst), len(want))
		}
	}
}
