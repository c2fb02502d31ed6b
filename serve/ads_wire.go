package serve

import (
	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// Wire assembly of discovery responses. A response is a few scalar fields
// around the resources' cached encoded Any bytes: protobuf encodes a
// repeated message field as the concatenation of its elements, so appending
// tag, length and the cached bytes yields exactly what proto.Marshal of the
// equivalent generated message gives (fields are written in field-number
// order, as proto.Marshal does). Nothing here allocates: callers size the
// buffer with the size* twin first, and version and nonce are formatted from
// integers on the stack.

// Field numbers of envoy.service.discovery.v3 messages.
const (
	fieldRespVersion      = 1 // DiscoveryResponse.version_info
	fieldRespResources    = 2 // DiscoveryResponse.resources (repeated Any)
	fieldRespTypeURL      = 4 // DiscoveryResponse.type_url
	fieldRespNonce        = 5 // DiscoveryResponse.nonce
	fieldRespControlPlane = 6 // DiscoveryResponse.control_plane

	fieldDeltaVersion      = 1 // DeltaDiscoveryResponse.system_version_info
	fieldDeltaResources    = 2 // DeltaDiscoveryResponse.resources (repeated Resource)
	fieldDeltaTypeURL      = 4 // DeltaDiscoveryResponse.type_url
	fieldDeltaNonce        = 5 // DeltaDiscoveryResponse.nonce
	fieldDeltaRemoved      = 6 // DeltaDiscoveryResponse.removed_resources
	fieldDeltaControlPlane = 7 // DeltaDiscoveryResponse.control_plane

	fieldResourceVersion = 1 // Resource.version
	fieldResourceAny     = 2 // Resource.resource
	fieldResourceName    = 3 // Resource.name

	fieldControlPlaneID = 1 // config.core.v3.ControlPlane.identifier
)

// versionLen is the length of a version string: 16 hex digits of a digest.
const versionLen = 16

// sizeField is the encoded size of a length-delimited field of n bytes.
func sizeField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// appendField appends a length-delimited field.
func appendField(dst []byte, num protowire.Number, b []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, b)
}

func appendStringField(dst []byte, num protowire.Number, s string) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendString(dst, s)
}

// appendHex appends v as versionLen lower-case hex digits.
func appendHex(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, digits[(v>>uint(shift))&0xf])
	}
	return dst
}

// decimalLen is the number of decimal digits of n.
func decimalLen(n uint64) int {
	l := 1
	for n >= 10 {
		n /= 10
		l++
	}
	return l
}

// appendDecimal appends n in decimal.
func appendDecimal(dst []byte, n uint64) []byte {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}

// wireHeader is what a response carries besides its resources.
type wireHeader struct {
	version      uint64 // digest, written as versionLen hex digits
	nonce        uint64 // per-stream counter, written in decimal; never 0
	typeURL      string
	controlPlane []byte // encoded config.core.v3.ControlPlane; nil omits it
}

// sizeDiscoveryResponse is the exact length appendDiscoveryResponse adds.
func sizeDiscoveryResponse(h *wireHeader, res []engine.Resource) int {
	n := sizeField(fieldRespVersion, versionLen) +
		sizeField(fieldRespTypeURL, len(h.typeURL)) +
		sizeField(fieldRespNonce, decimalLen(h.nonce))
	for i := range res {
		n += sizeField(fieldRespResources, len(res[i].Any))
	}
	if h.controlPlane != nil {
		n += sizeField(fieldRespControlPlane, len(h.controlPlane))
	}
	return n
}

// appendDiscoveryResponse appends an encoded
// envoy.service.discovery.v3.DiscoveryResponse carrying res in order.
func appendDiscoveryResponse(dst []byte, h *wireHeader, res []engine.Resource) []byte {
	var scratch [20]byte
	dst = appendField(dst, fieldRespVersion, appendHex(scratch[:0], h.version))
	for i := range res {
		dst = appendField(dst, fieldRespResources, res[i].Any)
	}
	dst = appendStringField(dst, fieldRespTypeURL, h.typeURL)
	dst = appendField(dst, fieldRespNonce, appendDecimal(scratch[:0], h.nonce))
	if h.controlPlane != nil {
		dst = appendField(dst, fieldRespControlPlane, h.controlPlane)
	}
	return dst
}

// sizeResource is the body size of one envoy.service.discovery.v3.Resource.
func sizeResource(r *engine.Resource) int {
	n := sizeField(fieldResourceAny, len(r.Any)) + sizeField(fieldResourceName, len(r.Name))
	if r.Version != "" {
		n += sizeField(fieldResourceVersion, len(r.Version))
	}
	return n
}

// sizeDeltaDiscoveryResponse is the exact length appendDeltaDiscoveryResponse
// adds.
func sizeDeltaDiscoveryResponse(h *wireHeader, res []engine.Resource, removed []string) int {
	return sizeDeltaBody(h, res) + sizeDeltaTail(h, removed)
}

// sizeDeltaBody is the size of appendDeltaBody's output.
func sizeDeltaBody(h *wireHeader, res []engine.Resource) int {
	n := sizeField(fieldDeltaVersion, versionLen) +
		sizeField(fieldDeltaTypeURL, len(h.typeURL))
	for i := range res {
		n += sizeField(fieldDeltaResources, sizeResource(&res[i]))
	}
	return n
}

// sizeDeltaTail is the size of appendDeltaTail's output.
func sizeDeltaTail(h *wireHeader, removed []string) int {
	n := sizeField(fieldDeltaNonce, decimalLen(h.nonce))
	for _, name := range removed {
		n += sizeField(fieldDeltaRemoved, len(name))
	}
	if h.controlPlane != nil {
		n += sizeField(fieldDeltaControlPlane, len(h.controlPlane))
	}
	return n
}

// appendDeltaDiscoveryResponse appends an encoded
// envoy.service.discovery.v3.DeltaDiscoveryResponse: each of res wrapped in a
// Resource{version, resource, name}, then removed as removed_resources.
func appendDeltaDiscoveryResponse(dst []byte, h *wireHeader, res []engine.Resource, removed []string) []byte {
	return appendDeltaTail(appendDeltaBody(dst, h, res), h, removed)
}

// appendDeltaBody appends a DeltaDiscoveryResponse's fields before the
// nonce (version, resources, type_url): the part streams making the same
// transition share. appendDeltaTail appends the rest, per stream, so the
// whole is in field order as proto.Marshal writes it.
func appendDeltaBody(dst []byte, h *wireHeader, res []engine.Resource) []byte {
	var scratch [20]byte
	dst = appendField(dst, fieldDeltaVersion, appendHex(scratch[:0], h.version))
	for i := range res {
		r := &res[i]
		dst = protowire.AppendTag(dst, fieldDeltaResources, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeResource(r)))
		if r.Version != "" {
			dst = appendStringField(dst, fieldResourceVersion, r.Version)
		}
		dst = appendField(dst, fieldResourceAny, r.Any)
		dst = appendStringField(dst, fieldResourceName, r.Name)
	}
	return appendStringField(dst, fieldDeltaTypeURL, h.typeURL)
}

// appendDeltaTail appends a DeltaDiscoveryResponse's nonce,
// removed_resources and control_plane.
func appendDeltaTail(dst []byte, h *wireHeader, removed []string) []byte {
	var scratch [20]byte
	dst = appendField(dst, fieldDeltaNonce, appendDecimal(scratch[:0], h.nonce))
	for _, name := range removed {
		dst = appendStringField(dst, fieldDeltaRemoved, name)
	}
	if h.controlPlane != nil {
		dst = appendField(dst, fieldDeltaControlPlane, h.controlPlane)
	}
	return dst
}

// encodeControlPlane encodes config.core.v3.ControlPlane{identifier: id},
// or returns nil for an empty id.
func encodeControlPlane(id string) []byte {
	if id == "" {
		return nil
	}
	return appendStringField(nil, fieldControlPlaneID, id)
}

// resourceHash identifies one (name, version) pair. Set digests are sums of
// these, so they do not depend on the order the engine returns resources in.
// Two one-shot hashes are several times faster than a streaming Digest on
// strings this short.
func resourceHash(name, version string) uint64 { return engine.ResourceDigest(name, version) }

// versionHash is the compact form of a resource version kept in Delta stream
// state. It is never 0, which marks "told absent".
func versionHash(version string) uint64 {
	return xxhash.Sum64String(version) | 1
}

// setDigest is the content digest of a response's resources: equal sets give
// equal digests on every stream and replica, so it doubles as version_info.
func setDigest(res []engine.Resource) uint64 {
	var sum uint64
	for i := range res {
		if d := res[i].Digest; d != 0 {
			sum += d // computed once per cached entry
		} else {
			sum += resourceHash(res[i].Name, res[i].Version)
		}
	}
	// Mix in the count so that the empty set and a set whose hashes cancel
	// differ, and finish with a multiply to spread the sum's low bits.
	return (sum ^ uint64(len(res))) * 0x9e3779b97f4a7c15
}
