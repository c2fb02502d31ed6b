package serve

import (
	"strconv"
	"strings"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// What a client sends is bounded before anything of it is kept or echoed:
// the node of a stream's first request (its id and the rest, metadata
// included), every type URL, and the number of types one stream keeps
// state for. Unknown types keep none. Client strings quoted in logs, gRPC
// statuses and debug output are clipped (clip), so a request is never
// amplified into a larger log line or status.

const (
	// maxTypeURLBytes bounds a type URL: real ones are under 100 bytes
	// ("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	// is 69). Longer ones end the stream with InvalidArgument.
	maxTypeURLBytes = 512
	// maxTypesPerStream bounds the types one stream keeps state for: the
	// engine serves six, and istioctl asks for two debug types.
	maxTypesPerStream = 32
	// maxSubscribedBytes bounds the names one Delta stream subscribes to
	// per type, in bytes (a SotW subscription is bounded by the request
	// size, being sent whole): 20,000 EDS names of a large mesh are ~1.5
	// MB.
	maxSubscribedBytes = 16 << 20

	// DefaultMaxNodeIDBytes is Limits.MaxNodeIDBytes' default. Istio's
	// node ids ("sidecar~IP~POD.NS~NS.svc.cluster.local") stay under 700
	// bytes with the longest names Kubernetes allows.
	DefaultMaxNodeIDBytes = 4 << 10
	// DefaultMaxNodeMetadataBytes is Limits.MaxNodeMetadataBytes' default.
	// istio-agent sends the pod's labels and annotations in the metadata,
	// and Kubernetes allows 256 KiB of annotations (and 1.5 MiB per object):
	// 1 MiB admits any such pod with room for the rest of the metadata.
	DefaultMaxNodeMetadataBytes = 1 << 20

	// clipShort is how much of a node id, type URL, name or nonce logs and
	// statuses quote.
	clipShort = 256
	// clipMessage is how much of a NACK's error_detail is logged, reported
	// to the session and kept for debug endpoints.
	clipMessage = 4 << 10
)

// clip returns s when it is at most n bytes, else its first n bytes (cut
// at a rune boundary) followed by "...(N bytes)", in a new string that does
// not keep s alive.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	var b strings.Builder
	b.Grow(cut + 24)
	b.WriteString(s[:cut])
	b.WriteString("...(")
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteString(" bytes)")
	return b.String()
}

// keepClipped is clip for a string that is kept (debug registry, session):
// always a copy, so a short substring never pins a large message.
func keepClipped(s string, n int) string {
	if len(s) <= n {
		return strings.Clone(s)
	}
	return clip(s, n)
}

// checkTypeURL refuses a type URL longer than maxTypeURLBytes.
func checkTypeURL(typeURL string) error {
	if len(typeURL) > maxTypeURLBytes {
		return status.Errorf(codes.InvalidArgument, "type_url %q is %d bytes, over the server's limit of %d bytes",
			clip(typeURL, 64), len(typeURL), maxTypeURLBytes)
	}
	return nil
}

// checkSubscribedBytes refuses a Delta subscription of more than
// maxSubscribedBytes of names for one type.
func checkSubscribedBytes(typeURL string, n int) error {
	if n > maxSubscribedBytes {
		return status.Errorf(codes.ResourceExhausted,
			"subscription to %d bytes of %s resource names on one stream exceeds the server's limit of %d bytes per type", n, typeURL, maxSubscribedBytes)
	}
	return nil
}

// namesBytes is the total length of names.
func namesBytes(names []string) int {
	n := 0
	for _, s := range names {
		n += len(s)
	}
	return n
}

// errTooManyTypes ends a stream that asks for more types than
// maxTypesPerStream.
var errTooManyTypes = status.Errorf(codes.ResourceExhausted,
	"a stream may request at most %d type URLs, the server's limit", maxTypesPerStream)

// checkNode validates the node of a stream's first request against the
// server's limits.
func (l *limitState) checkNode(node *corev3.Node) error {
	id := node.GetId()
	if node == nil || id == "" {
		return status.Error(codes.InvalidArgument, "the first request of a stream must carry a node with an id")
	}
	if l.maxNodeID > 0 && len(id) > l.maxNodeID {
		return status.Errorf(codes.InvalidArgument, "node id %q is %d bytes, over the server's limit of %d bytes",
			clip(id, clipShort), len(id), l.maxNodeID)
	}
	if l.maxNodeMeta > 0 {
		// The node apart from its id: metadata, locality, user agent,
		// extensions, client features.
		if n := proto.Size(node) - len(id); n > l.maxNodeMeta {
			return status.Errorf(codes.InvalidArgument, "node %q: metadata and other node fields are %d bytes, over the server's limit of %d bytes",
				clip(id, clipShort), n, l.maxNodeMeta)
		}
	}
	return nil
}
