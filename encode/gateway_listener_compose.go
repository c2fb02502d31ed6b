package encode

import (
	"github.com/pilotfish-mesh/pilotfish/index"

	"slices"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// A router's listener on 443 has a chain per HTTPS server: a thousand
// chains that differ in their SNI names, stat prefix and route name only.
// AppendGatewayListener writes them straight into the listener's encoding,
// each from its strings, the HCM parts marshaled once (gateway_hcm.go) and
// its transport socket marshaled once per listener; the listener's other
// fields and any other chain are marshaled from messages as before. The
// chains go where proto.Marshal puts filter_chains (field 3, after name and
// address), so the bytes are GatewayListener's; TestGatewayListenerComposed
// holds them to that.

// Listener, FilterChain, FilterChainMatch and Filter field numbers.
const (
	lsFilterChains     protowire.Number = 3
	fcFilterChainMatch protowire.Number = 1
	fcFilters          protowire.Number = 3
	fcTransportSocket  protowire.Number = 6
	fcConnectTimeout   protowire.Number = 9 // transport_socket_connect_timeout
	fcmServerNames     protowire.Number = 11
	filterName         protowire.Number = 1
	filterTypedConfig  protowire.Number = 4
)

// gwConnectTimeout is lsTransportSocketConnectTimeout's encoding, the
// Duration {seconds: 15}.
var gwConnectTimeout = protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 15)

// AppendGatewayListener appends GatewayListener(k) to prefix (an Any's
// type_url and value tag) as a length-delimited value, for ResourceAppend.
func AppendGatewayListener(prefix []byte, n index.Names, key *GatewayListenerKey) (string, []byte) {
	k := gwlIn{key, n}
	name, l, chains, parts := gatewayListener(k)
	if len(chains) == 0 {
		b, _ := marshalBare(l) // no listener: the entry is not served
		return "", protowire.AppendBytes(prefix, b)
	}
	sockets := map[*core.TransportSocket][]byte{}
	sizes := make([]int, len(chains))
	chainsSize := 0
	for i := range chains {
		c := &chains[i]
		if c.fc != nil {
			sizes[i] = msgSize(c.fc)
		} else {
			if s := c.http.socket; s != nil && sockets[s] == nil {
				sockets[s], _ = marshalBare(s)
			}
			sizes[i] = c.http.size(parts, sockets)
		}
		chainsSize += protowire.SizeTag(lsFilterChains) + protowire.SizeBytes(sizes[i])
	}
	head, err := marshalBare(l)
	if err != nil {
		panic("encode: marshal listener " + name + ": " + err.Error())
	}
	at := splitBefore(head, lsFilterChains)
	dst := slices.Grow(prefix, protowire.SizeVarint(uint64(len(head)+chainsSize))+len(head)+chainsSize)
	dst = protowire.AppendVarint(dst, uint64(len(head)+chainsSize))
	dst = append(dst, head[:at]...)
	for i := range chains {
		c := &chains[i]
		dst = protowire.AppendTag(dst, lsFilterChains, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizes[i]))
		if c.fc != nil {
			if dst, err = appendMsg(dst, c.fc); err != nil {
				panic("encode: marshal a filter chain of listener " + name + ": " + err.Error())
			}
		} else {
			dst = c.http.append(dst, parts, sockets)
		}
	}
	return name, append(dst, head[at:]...)
}

// splitBefore returns the offset of the first field of b numbered above
// num (len(b) when none is).
func splitBefore(b []byte, num protowire.Number) int {
	for i := 0; i < len(b); {
		n, typ, tn := protowire.ConsumeTag(b[i:])
		if tn < 0 {
			return len(b)
		}
		if n > num {
			return i
		}
		vn := protowire.ConsumeFieldValue(n, typ, b[i+tn:])
		if vn < 0 {
			return len(b)
		}
		i += tn + vn
	}
	return len(b)
}

// size is the encoded size of the chain.
func (c *gwHTTPChain) size(p *gwHCMParts, sockets map[*core.TransportSocket][]byte) int {
	n := 0
	if len(c.names) > 0 {
		n += protowire.SizeTag(fcFilterChainMatch) + protowire.SizeBytes(c.matchSize())
	}
	n += protowire.SizeTag(fcFilters) + protowire.SizeBytes(c.filterSize(p))
	if c.socket != nil {
		n += protowire.SizeTag(fcTransportSocket) + protowire.SizeBytes(len(sockets[c.socket]))
	}
	return n + protowire.SizeTag(fcConnectTimeout) + protowire.SizeBytes(len(gwConnectTimeout))
}

func (c *gwHTTPChain) matchSize() int {
	n := 0
	for _, s := range c.names {
		n += protowire.SizeTag(fcmServerNames) + protowire.SizeBytes(len(s))
	}
	return n
}

func (c *gwHTTPChain) anySize(p *gwHCMParts) int {
	return protowire.SizeTag(anyTypeURL) + protowire.SizeBytes(len(hcmTypeURL)) +
		protowire.SizeTag(anyValue) + protowire.SizeBytes(p.hcmSize(c.statPrefix, c.rds))
}

func (c *gwHTTPChain) filterSize(p *gwHCMParts) int {
	return protowire.SizeTag(filterName) + protowire.SizeBytes(len(hcmFilterName)) +
		protowire.SizeTag(filterTypedConfig) + protowire.SizeBytes(c.anySize(p))
}

// append appends the chain's encoding: its SNI match, its HCM filter, its
// transport socket, in field order.
func (c *gwHTTPChain) append(dst []byte, p *gwHCMParts, sockets map[*core.TransportSocket][]byte) []byte {
	if len(c.names) > 0 {
		dst = protowire.AppendTag(dst, fcFilterChainMatch, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(c.matchSize()))
		for _, s := range c.names {
			dst = protowire.AppendTag(dst, fcmServerNames, protowire.BytesType)
			dst = protowire.AppendString(dst, s)
		}
	}
	dst = protowire.AppendTag(dst, fcFilters, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(c.filterSize(p)))
	dst = protowire.AppendTag(dst, filterName, protowire.BytesType)
	dst = protowire.AppendString(dst, hcmFilterName)
	dst = protowire.AppendTag(dst, filterTypedConfig, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(c.anySize(p)))
	dst = protowire.AppendTag(dst, anyTypeURL, protowire.BytesType)
	dst = protowire.AppendString(dst, hcmTypeURL)
	dst = protowire.AppendTag(dst, anyValue, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(p.hcmSize(c.statPrefix, c.rds)))
	dst = p.appendHCM(dst, c.statPrefix, c.rds)
	if c.socket != nil {
		dst = protowire.AppendTag(dst, fcTransportSocket, protowire.BytesType)
		dst = protowire.AppendBytes(dst, sockets[c.socket])
	}
	dst = protowire.AppendTag(dst, fcConnectTimeout, protowire.BytesType)
	return protowire.AppendBytes(dst, gwConnectTimeout)
}

// msgSize and appendMsg size and encode a message as marshalBare does.
func msgSize(m proto.Message) int {
	if vt, ok := m.(vtMarshaler); ok {
		return vt.SizeVT()
	}
	return proto.MarshalOptions{Deterministic: true}.Size(m)
}

func appendMsg(dst []byte, m proto.Message) ([]byte, error) {
	if vt, ok := m.(vtMarshaler); ok {
		return marshalVT(dst, vt, m)
	}
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
}
