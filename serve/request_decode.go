package serve

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// DiscoveryRequest field numbers.
const (
	reqVersionInfo   = 1
	reqNode          = 2
	reqResourceNames = 3
	reqTypeURL       = 4
	reqResponseNonce = 5
	reqErrorDetail   = 6
)

// decodeDiscoveryRequest decodes b into r as proto.Unmarshal does, for the
// request every SotW ACK is: Envoy repeats its whole subscription in each
// (a thousand cluster names for EDS in a large mesh), and proto.Unmarshal
// allocates a string per name. Here the names are substrings of one copy
// of b: a few allocations whatever their number. A stream keeps a list only
// when it changes its subscription, and then shares one canonical copy
// among streams (sharedNames). A request
// with a field it does not know (resource_locators, unknown fields) is
// handed to proto.Unmarshal, so the result is always proto.Unmarshal's.
func decodeDiscoveryRequest(b []byte, r *discoveryv3.DiscoveryRequest) error {
	return decodeDiscoveryRequestOwned(string(b), r)
}

// decodeDiscoveryRequestOwned is decodeDiscoveryRequest of a message held
// in an immutable string, whose substrings the result may keep: the codec
// copies a request out of gRPC's frames once, into that string.
func decodeDiscoveryRequestOwned(all string, r *discoveryv3.DiscoveryRequest) error {
	b := unsafe.Slice(unsafe.StringData(all), len(all)) // read only
	if !decodeDiscoveryRequestFast(all, b, r) {
		r.Reset()
		return proto.Unmarshal(b, r)
	}
	return nil
}

// decodeDiscoveryRequestFast decodes b, whose string form is all.
func decodeDiscoveryRequestFast(all string, b []byte, r *discoveryv3.DiscoveryRequest) bool {
	r.Reset()
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 || typ != protowire.BytesType {
			return false
		}
		off += n
		v, n := protowire.ConsumeBytes(b[off:])
		if n < 0 {
			return false
		}
		start := off + n - len(v)
		s := all[start : off+n]
		off += n
		switch num {
		case reqVersionInfo, reqTypeURL, reqResponseNonce:
			if !utf8.ValidString(s) {
				return false
			}
			// Copied, not sliced from the message: a stream keeps these
			// (its type URL for its life), and a substring would pin the
			// whole request with its thousand names.
			switch num {
			case reqVersionInfo:
				r.VersionInfo = strings.Clone(s)
			case reqTypeURL:
				r.TypeUrl = knownTypeURL(s)
			default:
				r.ResponseNonce = strings.Clone(s)
			}
		case reqResourceNames:
			if !utf8.ValidString(s) {
				return false
			}
			if r.ResourceNames == nil {
				r.ResourceNames = make([]string, 0, countField(b, off, reqResourceNames)+1)
			}
			r.ResourceNames = append(r.ResourceNames, s)
		case reqNode:
			if r.Node == nil {
				r.Node = &corev3.Node{}
			}
			if mergeOpts.Unmarshal(v, r.Node) != nil {
				return false
			}
		case reqErrorDetail:
			if r.ErrorDetail == nil {
				r.ErrorDetail = &statuspb.Status{}
			}
			if mergeOpts.Unmarshal(v, r.ErrorDetail) != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// countField counts the occurrences of length-delimited field num in b
// from off (a well-formed prefix is assumed; it stops at the first error).
func countField(b []byte, off int, num protowire.Number) int {
	c := 0
	for off < len(b) {
		n2, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 || typ != protowire.BytesType {
			return c
		}
		off += n
		_, n = protowire.ConsumeBytes(b[off:])
		if n < 0 {
			return c
		}
		off += n
		if n2 == num {
			c++
		}
	}
	return c
}

// mergeOpts decodes a repeated occurrence of a message field into the
// message already decoded, as proto.Unmarshal does.
var mergeOpts = proto.UnmarshalOptions{Merge: true}

// knownTypeURL returns the constant for a type URL pilotfish serves (no
// allocation), else a copy of s.
func knownTypeURL(s string) string {
	for _, t := range [...]string{engine.TypeCluster, engine.TypeEndpoint, engine.TypeListener, engine.TypeRoute, engine.TypeSecret, engine.TypeNameTable, engine.TypeExtensionConfig} {
		if s == t {
			return t
		}
	}
	return strings.Clone(s)
}
