package encode

import (
	"sync"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// A router's HTTP connection managers differ only in their stat prefix and
// RDS route name (a listener on 443 with a thousand HTTPS servers has a
// thousand of them). Their encoding is composed from one marshal per
// listener of the HCM without those two: the fields before stat_prefix,
// stat_prefix, the other fields, then rds. That is the encoding
// proto.Marshal gives: it writes the fields outside oneofs in field-number
// order, then the oneof members (rds is one, of route_specifier); a
// template holding another oneof member is not composed.
// TestGatewayHCMComposed holds the composition to proto.Marshal's bytes.

// HttpConnectionManager and Rds field numbers.
const (
	hcmStatPrefix      protowire.Number = 2
	hcmRds             protowire.Number = 3
	rdsConfigSource    protowire.Number = 1
	rdsRouteConfigName protowire.Number = 2
)

var hcmTypeURL = "type.googleapis.com/" + string((&hcm.HttpConnectionManager{}).ProtoReflect().Descriptor().FullName())

// adsConfigSourceBytes is lsADS encoded, once.
var adsConfigSourceBytes = sync.OnceValue(func() []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(lsADS)
	if err != nil {
		panic("encode: marshal the ADS config source: " + err.Error())
	}
	return b
})

// gwHCMParts is a gateway HCM's encoding without stat_prefix and rds, split
// where stat_prefix goes; ok is false when it cannot be composed.
type gwHCMParts struct {
	head, tail []byte
	ok         bool
}

// hcmParts marshals k's gateway HCM once without stat_prefix and a route
// specifier, and splits it before the first field numbered above
// stat_prefix.
func (k gwlIn) hcmParts() gwHCMParts {
	h := k.gatewayHCM("", "")
	h.RouteSpecifier = nil
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(h)
	if err != nil {
		panic("encode: marshal a gateway HttpConnectionManager: " + err.Error())
	}
	fields := h.ProtoReflect().Descriptor().Fields()
	split := -1
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return gwHCMParts{}
		}
		if fd := fields.ByNumber(num); fd == nil || fd.ContainingOneof() != nil {
			return gwHCMParts{} // rds would not be last
		}
		if split < 0 && num > hcmStatPrefix {
			split = i
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return gwHCMParts{}
		}
		i += n + m
	}
	if split < 0 {
		split = len(b)
	}
	return gwHCMParts{head: b[:split], tail: b[split:], ok: true}
}

// appendHCM appends the encoding of the gateway HCM with statPrefix and
// RDS route name rds (non-empty).
func (p *gwHCMParts) appendHCM(dst []byte, statPrefix, rds string) []byte {
	ads := adsConfigSourceBytes()
	rdsLen := rdsSize(rds)
	dst = append(dst, p.head...)
	if statPrefix != "" {
		dst = protowire.AppendTag(dst, hcmStatPrefix, protowire.BytesType)
		dst = protowire.AppendString(dst, statPrefix)
	}
	dst = append(dst, p.tail...)
	dst = protowire.AppendTag(dst, hcmRds, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(rdsLen))
	dst = protowire.AppendTag(dst, rdsConfigSource, protowire.BytesType)
	dst = protowire.AppendBytes(dst, ads)
	dst = protowire.AppendTag(dst, rdsRouteConfigName, protowire.BytesType)
	return protowire.AppendString(dst, rds)
}

// hcmSize is the size of appendHCM's encoding.
func (p *gwHCMParts) hcmSize(statPrefix, rds string) int {
	n := len(p.head) + len(p.tail) + protowire.SizeTag(hcmRds) + protowire.SizeBytes(rdsSize(rds))
	if statPrefix != "" {
		n += protowire.SizeTag(hcmStatPrefix) + protowire.SizeBytes(len(statPrefix))
	}
	return n
}

// rdsSize is the size of the Rds message naming route configuration rds.
func rdsSize(rds string) int {
	return protowire.SizeTag(rdsConfigSource) + protowire.SizeBytes(len(adsConfigSourceBytes())) +
		protowire.SizeTag(rdsRouteConfigName) + protowire.SizeBytes(len(rds))
}

// filter is the HCM network filter for one server: the same message
// lsHCMFilter(k.gatewayHCM(statPrefix, rds)) gives, without building and
// marshaling it.
func (p *gwHCMParts) filter(k gwlIn, statPrefix, rds string) *listener.Filter {
	if rds == "" || !p.ok {
		return lsHCMFilter(k.gatewayHCM(statPrefix, rds)) // an inline route configuration, or not composable
	}
	b := p.appendHCM(make([]byte, 0, p.hcmSize(statPrefix, rds)), statPrefix, rds)
	return &listener.Filter{Name: hcmFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: hcmTypeURL, Value: b}}}
}
