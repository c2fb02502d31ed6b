package encode

import (
	"strconv"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// The direct encoder of the virtual host most services get: no
// VirtualService routes them, so it is istiod's default route to the
// service's cluster (defaultOutboundRoute). It writes the bytes the
// reference generator's message marshals to (vhost_direct_test.go checks
// byte equality; verify mode checks every generation) without building the
// ten messages of a route; other virtual hosts take the reference path.

// Field numbers of the messages written here (envoy.config.route.v3).
const (
	vhFieldName                protowire.Number = 1  // VirtualHost.name
	vhFieldDomains             protowire.Number = 2  // VirtualHost.domains
	vhFieldRoutes              protowire.Number = 3  // VirtualHost.routes
	vhFieldIncludeAttemptCount protowire.Number = 14 // VirtualHost.include_request_attempt_count
	rtFieldMatch               protowire.Number = 1  // Route.match
	rtFieldRoute               protowire.Number = 2  // Route.route
	rtFieldDecorator           protowire.Number = 5  // Route.decorator
	rtFieldName                protowire.Number = 14 // Route.name
	rmFieldPrefix              protowire.Number = 1  // RouteMatch.prefix
	raFieldCluster             protowire.Number = 1  // RouteAction.cluster
	raFieldTimeout             protowire.Number = 8  // RouteAction.timeout
	raFieldRetryPolicy         protowire.Number = 9  // RouteAction.retry_policy
	raFieldMaxGrpcTimeout      protowire.Number = 23 // RouteAction.max_grpc_timeout
	decoratorFieldOperation    protowire.Number = 1  // Decorator.operation
)

// appendVirtualHost is VirtualHostGen's direct encoder.
func appendVirtualHost(n index.Names, k *VirtualHostKey) (string, []byte, error) {
	if !k.takesDefaultRoute(n) {
		name, msg := VirtualHost(n, k)
		b, err := marshalBare(msg)
		return name, b, err
	}
	host := n.String(k.Service.Key.Host)
	var buf [32]vhDomain
	domains := k.keptDomains(n, buf[:0])
	domainBytes := 0
	for i := range domains {
		domainBytes += len(domains[i].host) + 48 // an estimate: the buffer's size only
	}
	if len(domains) == 0 {
		return "", nil, nil // an empty virtual host, as VirtualHost's
	}
	retry, err := k.Retry.encoded()
	if err != nil {
		return "", nil, err
	}

	var portBuf [10]byte
	port := strconv.AppendUint(portBuf[:0], uint64(k.Port), 10)
	nameLen := len(host) + 1 + len(port)
	cluster := len("outbound|") + len(port) + len("||") + len(host)
	operation := nameLen + len("/*")
	action := protowire.SizeTag(raFieldCluster) + protowire.SizeBytes(cluster) +
		protowire.SizeTag(raFieldTimeout) + protowire.SizeBytes(0) +
		protowire.SizeTag(raFieldMaxGrpcTimeout) + protowire.SizeBytes(0)
	if retry != nil {
		action += protowire.SizeTag(raFieldRetryPolicy) + protowire.SizeBytes(len(retry))
	}
	match := protowire.SizeTag(rmFieldPrefix) + protowire.SizeBytes(1)
	decorator := protowire.SizeTag(decoratorFieldOperation) + protowire.SizeBytes(operation)
	rt := protowire.SizeTag(rtFieldMatch) + protowire.SizeBytes(match) +
		protowire.SizeTag(rtFieldRoute) + protowire.SizeBytes(action) +
		protowire.SizeTag(rtFieldDecorator) + protowire.SizeBytes(decorator) +
		protowire.SizeTag(rtFieldName) + protowire.SizeBytes(len(defaultRouteName))

	size := protowire.SizeTag(vhFieldName) + protowire.SizeBytes(nameLen) +
		protowire.SizeTag(vhFieldRoutes) + protowire.SizeBytes(rt) +
		protowire.SizeTag(vhFieldIncludeAttemptCount) + protowire.SizeVarint(1) + domainBytes

	b := make([]byte, 0, size)
	b = protowire.AppendTag(b, vhFieldName, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(nameLen))
	nameAt := len(b)
	b = append(append(append(b, host...), ':'), port...)
	for i := range domains {
		b = protowire.AppendTag(b, vhFieldDomains, protowire.BytesType)
		b = appendLenPrefixed(b, domains[i].appendText)
	}
	b = protowire.AppendTag(b, vhFieldRoutes, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(rt))
	b = protowire.AppendTag(b, rtFieldMatch, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(match))
	b = protowire.AppendTag(b, rmFieldPrefix, protowire.BytesType)
	b = protowire.AppendString(b, "/")
	b = protowire.AppendTag(b, rtFieldRoute, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(action))
	b = protowire.AppendTag(b, raFieldCluster, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(cluster))
	b = append(append(append(append(b, "outbound|"...), port...), "||"...), host...)
	b = protowire.AppendTag(b, raFieldTimeout, protowire.BytesType)
	b = protowire.AppendVarint(b, 0)
	if retry != nil {
		b = protowire.AppendTag(b, raFieldRetryPolicy, protowire.BytesType)
		b = protowire.AppendBytes(b, retry)
	}
	b = protowire.AppendTag(b, raFieldMaxGrpcTimeout, protowire.BytesType)
	b = protowire.AppendVarint(b, 0)
	b = protowire.AppendTag(b, rtFieldDecorator, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(decorator))
	b = protowire.AppendTag(b, decoratorFieldOperation, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(operation))
	b = append(append(b, b[nameAt:nameAt+nameLen]...), "/*"...)
	b = protowire.AppendTag(b, rtFieldName, protowire.BytesType)
	b = protowire.AppendString(b, defaultRouteName)
	b = protowire.AppendTag(b, vhFieldIncludeAttemptCount, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	return string(b[nameAt : nameAt+nameLen]), b, nil
}

// takesDefaultRoute reports whether k's virtual host is the default one
// the direct encoder writes: a service's, no VirtualService, not a
// sniffed port's, no consistent-hash DestinationRule.
func (k *VirtualHostKey) takesDefaultRoute(n index.Names) bool {
	if k.Service == nil || k.VirtualService != nil || k.Sniffed {
		return false
	}
	return len(k.DestinationRules) == 0 || rtHashPolicy(k.serviceConsistentHash(n.String(k.Service.Key.Host))) == nil
}

// appendLenPrefixed appends what write appends, length-prefixed, without
// knowing the length first: one byte is reserved (lengths below 128, all
// but the rarest domains) and the text moved when it is longer.
func appendLenPrefixed(b []byte, write func([]byte) []byte) []byte {
	at := len(b)
	b = write(append(b, 0))
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var hdr [binaryMaxVarintLen64]byte
	h := protowire.AppendVarint(hdr[:0], uint64(n))
	b = append(b, h[1:]...) // room for the longer prefix
	copy(b[at+len(h):], b[at+1:at+1+n])
	copy(b[at:], h)
	return b
}

// encodedRetries holds the encodings of the mesh default retry policies
// seen, by value: a mesh has one at a time (bounded all the same).
var encodedRetries struct {
	sync.Mutex
	m map[HTTPRetry][]byte
}

const maxEncodedRetries = 16

// encoded is the bare encoding of the route retry policy r stands for (nil
// when retries are off).
func (r *HTTPRetry) encoded() ([]byte, error) {
	encodedRetries.Lock()
	b, ok := encodedRetries.m[*r]
	encodedRetries.Unlock()
	if ok {
		return b, nil
	}
	if p := r.policy(false); p != nil {
		var err error
		if b, err = marshalBare(p); err != nil {
			return nil, err
		}
	}
	encodedRetries.Lock()
	if encodedRetries.m == nil || len(encodedRetries.m) >= maxEncodedRetries {
		encodedRetries.m = map[HTTPRetry][]byte{}
	}
	encodedRetries.m[*r] = b
	encodedRetries.Unlock()
	return b, nil
}
