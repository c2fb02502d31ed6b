package encode

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// PartAppend is Part for generators that encode their part directly: app
// returns the part's name and bare encoding. ref is the reference generator
// that builds the same part as a message: in verify mode every generation,
// hit or miss, is checked to describe the same message as ref's, so the
// direct encoder cannot drift from the readable one.
func PartAppend[K Key](c *Cache, kind Kind, k K, app func(K) (string, []byte, error), ref func(K) (string, proto.Message)) (*Entry, error) {
	build := func() (string, []byte, error) {
		name, b, err := app(k)
		if err == nil && c.verify {
			refName, refMsg := ref(k)
			if got := barePayload(b, ref, k); refName != name || !proto.Equal(got, refMsg) {
				panic(fmt.Sprintf("encode: verify: the direct encoding of %s %q differs from its reference generator", kind, name))
			}
		}
		return name, b, err
	}
	e, err := c.get(kind, k.Hash(), build, func(b []byte) proto.Message { return barePayload(b, ref, k) })
	record(c, kind, e, k)
	return e, err
}
