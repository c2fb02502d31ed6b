package serve

import (
	"github.com/puzpuzpuz/xsync/v4"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// sharedBodyOf returns the encoded SotW DiscoveryResponse for h and res
// without its nonce, assembled once per (type, version, content) and
// shared: a push of one config to 10,000 sidecars of a class assembles each
// type's body once, and every stream writes the same immutable bytes
// (followed by its own nonce field). content is the digest of the
// resources themselves: h.version for a full set, another digest when the
// response carries part of the set its version names (the added clusters
// of an EDS subscription change). The returned slice must not be modified.
func (s *XDSServer) sharedBodyOf(h *wireHeader, content uint64, res []engine.Resource) []byte {
	bodies := s.bodies
	k := bodyKey{typeURL: h.typeURL, version: h.version, content: content}
	if b, ok := bodies.Load(k); ok {
		return b
	}
	body := appendSotWBody(make([]byte, 0, sizeDiscoveryResponse(h, res)), h, res)
	if bodies.Size() >= maxBodies {
		// Bodies of superseded versions are never asked for again; a full
		// table is dropped rather than tracked (streams keep theirs alive
		// while sending).
		bodies.Clear()
	}
	bodies.Store(k, body)
	return body
}

type bodyKey struct {
	typeURL string
	version uint64 // version_info
	content uint64 // digest of the resources (= version for full sets)
}

// maxBodies bounds the table: it holds a few versions per type per class.
const maxBodies = 4096

// newBodies returns an XDSServer's body table (per server: the body carries
// the server's control_plane identifier).
func newBodies() *xsync.Map[bodyKey, []byte] { return xsync.NewMap[bodyKey, []byte]() }

// appendSotWBody appends a DiscoveryResponse without the nonce field.
func appendSotWBody(dst []byte, h *wireHeader, res []engine.Resource) []byte {
	var scratch [20]byte
	dst = appendField(dst, fieldRespVersion, appendHex(scratch[:0], h.version))
	for i := range res {
		dst = appendField(dst, fieldRespResources, res[i].Any)
	}
	dst = appendStringField(dst, fieldRespTypeURL, h.typeURL)
	if h.controlPlane != nil {
		dst = appendField(dst, fieldRespControlPlane, h.controlPlane)
	}
	return dst
}
