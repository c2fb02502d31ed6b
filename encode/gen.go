package encode

import (
	"errors"
	"fmt"
	"math/bits"

	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// ResourceGen generates whole resources (encoded as google.protobuf.Any)
// from keys of type K, PartGen the parts containers are assembled from.
// Only this package makes generators — their fields are unexported, and
// Resource and Part accept nothing else — so every cached entry is built
// by this package's code from its key and the read-only index.Names, never
// by a function a caller supplies.
type ResourceGen[K Key] struct{ g gen[K] }

// PartGen: see ResourceGen.
type PartGen[K Key] struct{ g gen[K] }

type gen[K Key] struct {
	kind Kind
	// typeURL is the Any's type URL of a resource ("" for a part).
	typeURL string
	// ref builds the message: the reference generator.
	ref func(index.Names, K) (string, proto.Message)
	// app, when set, encodes directly instead: after prefix (the Any's
	// type_url and the tag of its value; nil for a part) it appends the
	// message as a length-delimited value (resources) or its bare encoding
	// (parts), to a new buffer. It may assemble the encoding from parts it
	// gets from c under keys derived from k alone (gateway virtual hosts
	// around their cached routes). Verify mode checks every direct encoding
	// against ref's message, so the fast encoder cannot drift from the
	// readable one.
	app func(c *Cache, prefix []byte, n index.Names, k K) (string, []byte, error)
}

func resourceGen[K Key](kind Kind, typeURL string, ref func(index.Names, K) (string, proto.Message)) ResourceGen[K] {
	return ResourceGen[K]{gen[K]{kind: kind, typeURL: typeURL, ref: ref}}
}

// resourceGenAppend is resourceGen with a direct encoder.
func resourceGenAppend[K Key](kind Kind, typeURL string, ref func(index.Names, K) (string, proto.Message), app func(prefix []byte, n index.Names, k K) (string, []byte)) ResourceGen[K] {
	return ResourceGen[K]{gen[K]{kind: kind, typeURL: typeURL, ref: ref, app: func(_ *Cache, prefix []byte, n index.Names, k K) (string, []byte, error) {
		name, b := app(prefix, n, k)
		return name, b, nil
	}}}
}

func partGen[K Key](kind Kind, ref func(index.Names, K) (string, proto.Message)) PartGen[K] {
	return PartGen[K]{gen[K]{kind: kind, ref: ref}}
}

// partGenAppend is partGen with a direct encoder.
func partGenAppend[K Key](kind Kind, ref func(index.Names, K) (string, proto.Message), app func(n index.Names, k K) (string, []byte, error)) PartGen[K] {
	return PartGen[K]{gen[K]{kind: kind, ref: ref, app: func(_ *Cache, _ []byte, n index.Names, k K) (string, []byte, error) {
		return app(n, k)
	}}}
}

// partGenComposed is partGen with a direct encoder that assembles the part
// from other parts of the same cache.
func partGenComposed[K Key](kind Kind, ref func(index.Names, K) (string, proto.Message), app func(c *Cache, n index.Names, k K) (string, []byte, error)) PartGen[K] {
	return PartGen[K]{gen[K]{kind: kind, ref: ref, app: func(c *Cache, _ []byte, n index.Names, k K) (string, []byte, error) {
		return app(c, n, k)
	}}}
}

// ErrNoGenerator: the zero ResourceGen or PartGen, which generates nothing.
var ErrNoGenerator = errors.New("encode: the zero generator")

// Resource returns the cached Any-encoded resource g generates for k,
// generating and marshaling it on a miss. n resolves the symbols of k and
// of the rows it holds; the entry is cached under k's hash and n's tables.
func Resource[K Key](c *Cache, n index.Names, k K, g ResourceGen[K]) (*Entry, error) {
	return get(c, n, k, &g.g, true)
}

// Part returns the cached bare encoding of a message that containers embed
// as a repeated field (a VirtualHost in a RouteConfiguration, a FilterChain
// in a Listener): protobuf encodes a repeated field as the concatenation of
// its elements, so a container is assembled from cached parts.
func Part[K Key](c *Cache, n index.Names, k K, g PartGen[K]) (*Entry, error) {
	return get(c, n, k, &g.g, false)
}

func get[K Key](c *Cache, n index.Names, k K, g *gen[K], resource bool) (*Entry, error) {
	if g.ref == nil {
		return nil, ErrNoGenerator
	}
	ref := func() (string, proto.Message) { return g.ref(n, k) }
	decode := func(b []byte) proto.Message { return barePayload(b, ref) }
	if resource {
		decode = func(b []byte) proto.Message { return anyPayload(b, ref) }
	}
	set, ctx := keyPatches(k)
	build := func() (string, []byte, error) {
		if set != nil {
			// Patched: the reference message, patched, then marshaled; a
			// REMOVE leaves an entry without bytes (Entry.Removed).
			name, msg := ref()
			if msg = applyPatches(c, set, ctx, keyHosts(n, k), msg); msg == nil {
				return name, nil, nil
			}
			var b []byte
			var err error
			if resource {
				b, err = AppendAny(nil, g.typeURL, msg)
			} else {
				b, err = marshalBare(msg)
			}
			return name, b, err
		}
		if g.app == nil {
			name, msg := ref()
			if msg == nil {
				return name, nil, nil // nothing to generate (Entry.Removed)
			}
			var b []byte
			var err error
			if resource {
				b, err = AppendAny(nil, g.typeURL, msg)
			} else {
				b, err = marshalBare(msg)
			}
			return name, b, err
		}
		var prefix []byte
		if resource {
			prefix = anyPrefix(g.typeURL)
		}
		name, b, err := g.app(c, prefix, n, k)
		if err == nil && c.verify {
			refName, refMsg := ref()
			if got := decode(b); refName != name || !proto.Equal(got, refMsg) {
				panic(fmt.Sprintf("encode: verify: the direct encoding of %s %q differs from its reference generator", g.kind, name))
			}
		}
		return name, b, err
	}
	e, err := c.get(g.kind, k.Hash()^namesMix(n), build, decode)
	record(c, g.kind, e, k)
	return e, err
}

// namesMix keeps the entries of different writers' tables apart: equal
// Syms of two writers may name different strings.
func namesMix(n index.Names) uint64 {
	return bits.RotateLeft64(n.ID()*0xbf58476d1ce4e5b9, 29)
}
