package encode

import (
	"strings"
	"sync"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	networking "istio.io/api/networking/v1alpha3"
)

// Most gateway routes are simple: a path match and one destination, with
// the default timeout and retries. The direct encoder writes those from
// their strings without building a Route (seven messages per route), in
// vtprotobuf's field order; without vtprotobuf every route is translated.
// TestGatewayVirtualHostComposed compares the bytes with the translated
// routes' marshal, and verify mode checks every generation.

// gwDirect: the route messages are vtprotobuf's, whose field order the
// direct encoding follows.
var gwDirect = func() bool {
	_, ok := any(&route.Route{}).(vtMarshaler)
	return ok
}()

// gwSimple reports whether translate would give (in, m) only a name, a
// path match, one cluster, the default timeout and retry policy, and a
// decorator (plus its VirtualService's metadata).
func gwSimple(in *networking.HTTPRoute, m *networking.HTTPMatchRequest) bool {
	if in.GetRedirect() != nil || in.GetDirectResponse() != nil || in.GetHeaders() != nil || in.GetRewrite() != nil ||
		in.GetMirror() != nil || len(in.GetMirrors()) > 0 || in.GetFault() != nil || in.GetCorsPolicy() != nil ||
		in.GetRetries() != nil || in.GetTimeout() != nil || len(in.GetRoute()) != 1 {
		return false
	}
	if d := in.GetRoute()[0]; d.GetHeaders() != nil || d.GetDestination().GetHost() == "" {
		return false
	}
	if m == nil {
		return true
	}
	if len(m.GetHeaders()) > 0 || len(m.GetWithoutHeaders()) > 0 || len(m.GetQueryParams()) > 0 ||
		m.GetMethod() != nil || m.GetAuthority() != nil || m.GetScheme() != nil || m.GetStatPrefix() != "" {
		return false
	}
	return true
}

// gwPath is the path match rtTranslateMatch gives m: prefix "/" unless its
// uri is exact, prefix or regex.
func gwPath(m *networking.HTTPMatchRequest) (kind protowire.Number, path string) {
	switch u := m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return rmPath, u.Exact
	case *networking.StringMatch_Prefix:
		return rmPrefix, u.Prefix
	case *networking.StringMatch_Regex:
		return rmSafeRegex, u.Regex
	}
	return rmPrefix, "/"
}

// gwSimpleCatchAll is rtIsCatchAll of a simple route.
func gwSimpleCatchAll(m *networking.HTTPMatchRequest) bool {
	kind, path := gwPath(m)
	return (kind == rmPrefix && path == "/") || (kind == rmSafeRegex && path == ".*")
}

// gwOperation is operation() of a simple route to cluster
// (outbound|PORT|SUBSET|HOST): "HOST:PORT" then the path ("PREFIX*").
func gwOperation(cluster string, m *networking.HTTPMatchRequest) string {
	kind, path := gwPath(m)
	suffix := ""
	if kind == rmPrefix {
		suffix = "*"
	}
	c, _ := strings.CutPrefix(cluster, "outbound|")
	port, rest, _ := strings.Cut(c, "|")
	_, host, _ := strings.Cut(rest, "|")
	return host + ":" + port + path + suffix
}

// Route, RouteMatch, RouteAction, RegexMatcher and Decorator field numbers.
const (
	routeMatch         protowire.Number = 1
	routeRoute         protowire.Number = 2
	routeDecorator     protowire.Number = 5
	routeName          protowire.Number = 14
	rmPrefix           protowire.Number = 1
	rmPath             protowire.Number = 2
	rmCaseSensitive    protowire.Number = 4
	rmSafeRegex        protowire.Number = 10
	regexRegex         protowire.Number = 2
	raCluster          protowire.Number = 1
	decoratorOperation protowire.Number = 1
)

// gwActionTail is a simple route's RouteAction after its cluster: timeout
// and max_grpc_timeout 0s, the default retry policy.
var gwActionTail = sync.OnceValue(func() []byte {
	b, err := marshalBare(&route.RouteAction{Timeout: rtNoTimeout, RetryPolicy: rtDefaultRetryPolicy, MaxGrpcTimeout: rtNoTimeout})
	if err != nil {
		panic("encode: marshal the default route action: " + err.Error())
	}
	return b
})

// BoolValue encodings of case_sensitive.
var (
	gwTrue  = []byte{0x08, 0x01}
	gwFalse = []byte{}
)

func (it *gwRouteItem) caseSensitive() []byte {
	if it.m.GetIgnoreUriCase() {
		return gwFalse
	}
	return gwTrue
}

func (it *gwRouteItem) matchSize() int {
	kind, path := gwPath(it.m)
	n := 0
	if it.m != nil { // no match: no case_sensitive (rtTranslateMatch)
		n += protowire.SizeTag(rmCaseSensitive) + protowire.SizeBytes(len(it.caseSensitive()))
	}
	if kind == rmSafeRegex {
		return n + protowire.SizeTag(rmSafeRegex) + protowire.SizeBytes(protowire.SizeTag(regexRegex)+protowire.SizeBytes(len(path)))
	}
	return n + protowire.SizeTag(kind) + protowire.SizeBytes(len(path))
}

func (it *gwRouteItem) actionSize() int {
	return protowire.SizeTag(raCluster) + protowire.SizeBytes(len(it.cluster)) + len(gwActionTail())
}

func (it *gwRouteItem) decoratorSize() int {
	return protowire.SizeTag(decoratorOperation) + protowire.SizeBytes(len(it.operation))
}

// simpleSize is the size of a simple route's encoding without metadata.
func (it *gwRouteItem) simpleSize() int {
	n := protowire.SizeTag(routeMatch) + protowire.SizeBytes(it.matchSize()) +
		protowire.SizeTag(routeRoute) + protowire.SizeBytes(it.actionSize()) +
		protowire.SizeTag(routeDecorator) + protowire.SizeBytes(it.decoratorSize())
	if it.name != "" {
		n += protowire.SizeTag(routeName) + protowire.SizeBytes(len(it.name))
	}
	return n
}

// appendSimple appends a simple route (size simpleSize) as a routes field
// with md, its encoded metadata field, at its place: match, route,
// metadata, decorator, name.
func (it *gwRouteItem) appendSimple(dst []byte, size int, md []byte) []byte {
	dst = protowire.AppendTag(dst, gwVHRoutes, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size+len(md)))
	dst = protowire.AppendTag(dst, routeMatch, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(it.matchSize()))
	kind, path := gwPath(it.m)
	if kind != rmSafeRegex {
		dst = protowire.AppendTag(dst, kind, protowire.BytesType)
		dst = protowire.AppendString(dst, path)
	}
	if it.m != nil {
		dst = protowire.AppendTag(dst, rmCaseSensitive, protowire.BytesType)
		dst = protowire.AppendBytes(dst, it.caseSensitive())
	}
	if kind == rmSafeRegex {
		dst = protowire.AppendTag(dst, rmSafeRegex, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(protowire.SizeTag(regexRegex)+protowire.SizeBytes(len(path))))
		dst = protowire.AppendTag(dst, regexRegex, protowire.BytesType)
		dst = protowire.AppendString(dst, path)
	}
	dst = protowire.AppendTag(dst, routeRoute, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(it.actionSize()))
	dst = protowire.AppendTag(dst, raCluster, protowire.BytesType)
	dst = protowire.AppendString(dst, it.cluster)
	dst = append(dst, gwActionTail()...)
	dst = append(dst, md...)
	dst = protowire.AppendTag(dst, routeDecorator, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(it.decoratorSize()))
	dst = protowire.AppendTag(dst, decoratorOperation, protowire.BytesType)
	dst = protowire.AppendString(dst, it.operation)
	if it.name != "" {
		dst = protowire.AppendTag(dst, routeName, protowire.BytesType)
		dst = protowire.AppendString(dst, it.name)
	}
	return dst
}
