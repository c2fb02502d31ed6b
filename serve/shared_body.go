package serve

import (
	"unsafe"

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
//
// The table is weak (weak_table.go): a body lives while a stream holds it
// as the last it sent of its type (sotwType.body) or gRPC is writing it.
// Once every stream has been sent a newer version, the superseded body is
// collected: under config churn the table keeps the bodies in use, not the
// last thousands.
func (s *XDSServer) sharedBodyOf(h *wireHeader, content uint64, res []engine.Resource) []byte {
	k := bodyKey{typeURL: h.typeURL, version: h.version, content: content}
	p, n, _ := s.bodies.get(k, func() (*byte, int) {
		body := appendSotWBody(make([]byte, 0, max(sizeDiscoveryResponse(h, res), minSharedBody)), h, res)
		return &body[0], len(body)
	})
	return unsafe.Slice(p, n)
}

type bodyKey struct {
	typeURL string
	version uint64 // version_info
	content uint64 // digest of the resources (= version for full sets)
}

// maxBodies bounds the table's entries: a few live versions per type per
// class. The bodies themselves belong to the streams that hold them.
const maxBodies = 16384

// minSharedBody keeps a body out of the runtime's tiny allocator, which
// may batch it with other objects and so never let it be collected.
const minSharedBody = 32

// newBodies returns an XDSServer's body table (per server: the body carries
// the server's control_plane identifier).
func newBodies() *weakTable[bodyKey, byte] { return newWeakTable[bodyKey, byte](maxBodies) }

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
