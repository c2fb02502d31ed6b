package encode

import (
	"fmt"
	"strconv"
	"sync"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// RouteConfigurationType is the type URL of RDS resources.
const RouteConfigurationType = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"

// RouteConfiguration field numbers (envoy.config.route.v3.RouteConfiguration).
const (
	rcName                     protowire.Number = 1
	rcVirtualHosts             protowire.Number = 2
	rcValidateClusters         protowire.Number = 7
	rcMaxDirectResponseBody    protowire.Number = 11
	rcIgnorePortInHostMatching protowire.Number = 14
)

// rcMaxDirectResponseBodyBytes is istiod's 1 MiB direct response limit.
const rcMaxDirectResponseBodyBytes = 1 << 20

// RouteConfigOptions are the scalar fields of a route configuration besides
// its name and virtual hosts.
type RouteConfigOptions uint8

const (
	// RouteConfigPlain has no other field (proxyless gRPC).
	RouteConfigPlain RouteConfigOptions = iota
	// RouteConfigSidecar sets what istiod sets on a sidecar's outbound
	// route configuration: validate_clusters false, a 1 MiB direct response
	// limit, ignore_port_in_host_matching.
	RouteConfigSidecar
	// RouteConfigValidateOnly sets validate_clusters false: istiod's empty
	// answer to a route name it does not know.
	RouteConfigValidateOnly
)

// AppendRouteConfiguration appends the encoding of a RouteConfiguration
// named name with the given virtual hosts, each the bare encoding of a
// VirtualHost (a cached part), wrapped in a google.protobuf.Any. Protobuf
// encodes a repeated message field as the concatenation of its elements, so
// this is a handful of appends: no virtual host is re-encoded. Empty parts
// (a virtual host with nothing to route) are skipped.
func AppendRouteConfiguration(dst []byte, name string, vhosts [][]byte, opts RouteConfigOptions) []byte {
	n := rcSize(name, vhosts, opts)
	dst = protowire.AppendTag(dst, anyTypeURL, protowire.BytesType)
	dst = protowire.AppendString(dst, RouteConfigurationType)
	dst = protowire.AppendTag(dst, anyValue, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(n))
	return appendRouteConfigurationBare(dst, name, vhosts, opts)
}

func rcSize(name string, vhosts [][]byte, opts RouteConfigOptions) int {
	n := 0
	if name != "" {
		n += protowire.SizeTag(rcName) + protowire.SizeBytes(len(name))
	}
	for _, vh := range vhosts {
		if len(vh) > 0 {
			n += protowire.SizeTag(rcVirtualHosts) + protowire.SizeBytes(len(vh))
		}
	}
	if opts == RouteConfigValidateOnly {
		n += protowire.SizeTag(rcValidateClusters) + protowire.SizeBytes(0)
	}
	if opts == RouteConfigSidecar {
		n += protowire.SizeTag(rcValidateClusters) + protowire.SizeBytes(0)
		inner := protowire.SizeTag(1) + protowire.SizeVarint(rcMaxDirectResponseBodyBytes)
		n += protowire.SizeTag(rcMaxDirectResponseBody) + protowire.SizeBytes(inner)
		n += protowire.SizeTag(rcIgnorePortInHostMatching) + protowire.SizeVarint(1)
	}
	return n
}

func appendRouteConfigurationBare(dst []byte, name string, vhosts [][]byte, opts RouteConfigOptions) []byte {
	if name != "" {
		dst = protowire.AppendTag(dst, rcName, protowire.BytesType)
		dst = protowire.AppendString(dst, name)
	}
	for _, vh := range vhosts {
		if len(vh) == 0 {
			continue
		}
		dst = protowire.AppendTag(dst, rcVirtualHosts, protowire.BytesType)
		dst = protowire.AppendBytes(dst, vh)
	}
	if opts == RouteConfigValidateOnly {
		dst = protowire.AppendTag(dst, rcValidateClusters, protowire.BytesType)
		dst = protowire.AppendVarint(dst, 0)
	}
	if opts == RouteConfigSidecar {
		// validate_clusters: BoolValue{false}, an empty message.
		dst = protowire.AppendTag(dst, rcValidateClusters, protowire.BytesType)
		dst = protowire.AppendVarint(dst, 0)
		dst = protowire.AppendTag(dst, rcMaxDirectResponseBody, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(protowire.SizeTag(1)+protowire.SizeVarint(rcMaxDirectResponseBodyBytes)))
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, rcMaxDirectResponseBodyBytes)
		dst = protowire.AppendTag(dst, rcIgnorePortInHostMatching, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 1)
	}
	return dst
}

// NewRouteConfiguration builds the same route configuration as
// AppendRouteConfiguration the slow way, from messages (tests, debugging).
func NewRouteConfiguration(name string, vhosts []*route.VirtualHost, opts RouteConfigOptions) *route.RouteConfiguration {
	rc := &route.RouteConfiguration{Name: name}
	for _, vh := range vhosts {
		if vh.GetName() != "" {
			rc.VirtualHosts = append(rc.VirtualHosts, vh)
		}
	}
	if opts == RouteConfigValidateOnly {
		rc.ValidateClusters = wrapperspb.Bool(false)
	}
	if opts == RouteConfigSidecar {
		rc.ValidateClusters = wrapperspb.Bool(false)
		rc.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(rcMaxDirectResponseBodyBytes)
		rc.IgnorePortInHostMatching = true
	}
	return rc
}

// RouteConfigKey names an assembled route configuration by its parts: two
// assemblies with equal names, options and part versions are equal.
type RouteConfigKey struct {
	Name    string
	Options RouteConfigOptions
	// VirtualHosts are cached parts (Part entries of KindVirtualHost, or
	// CatchAllVirtualHost), in the order they appear.
	VirtualHosts []*Entry
	// Patches are the EnvoyFilter patches that may apply to the
	// configuration (nil: none), in Context: the hosts they change are
	// decoded, patched and encoded again (envoyfilter.go).
	Patches *envoypatch.Set
	Context envoypatch.Context
	// ServerPorts are, for a router's configuration with patches, the
	// Gateway server ports merged onto its route port (istiod's
	// GatewayPortMap entry): a ROUTE_CONFIGURATION match's portNumber is
	// one of them. Sorted; nil when none differ from the route port.
	ServerPorts []uint32
}

// Hash feeds the name, the options and every part's version.
func (k *RouteConfigKey) Hash() uint64 {
	h := NewHasher("RouteConfigKey")
	h.Str(k.Name)
	h.U32(uint32(k.Options))
	h.Int(len(k.VirtualHosts))
	for _, e := range k.VirtualHosts {
		h.Bool(e != nil)
		if e != nil {
			h.Str(e.Version)
		}
	}
	hashPatches(&h, k.Patches)
	h.U32(uint32(k.Context))
	h.Int(len(k.ServerPorts))
	for _, p := range k.ServerPorts {
		h.U32(p)
	}
	return h.Sum()
}

// gatewayPorts is k's GatewayPorts (nil without ServerPorts).
func (k *RouteConfigKey) gatewayPorts() envoypatch.GatewayPorts {
	if len(k.ServerPorts) == 0 {
		return nil
	}
	ports := make([]int, len(k.ServerPorts))
	for i, p := range k.ServerPorts {
		ports[i] = int(p)
	}
	return envoypatch.GatewayPorts{envoypatch.GatewayRoutePort(k.Name): ports}
}

// rcScratch pools the part lists of route configuration assemblies.
var rcScratch = sync.Pool{New: func() any { s := make([][]byte, 0, 64); return &s }}

// RouteConfigurationEntry returns the cached Any-encoded route
// configuration assembled from k's parts, assembling it on a miss. In verify
// mode a hit is re-assembled and compared.
func RouteConfigurationEntry(c *Cache, k *RouteConfigKey) (*Entry, error) {
	return c.get(KindRoute, k.Hash(), func() (string, []byte, error) {
		if k.Patches != nil {
			return patchRouteConfiguration(c, k)
		}
		sp := rcScratch.Get().(*[][]byte)
		parts := (*sp)[:0]
		size := 0
		for _, e := range k.VirtualHosts {
			parts = append(parts, e.Bytes)
			size += len(e.Bytes) + 4
		}
		b := AppendRouteConfiguration(make([]byte, 0, size+len(k.Name)+96), k.Name, parts, k.Options)
		clear(parts)
		*sp = parts[:0]
		rcScratch.Put(sp)
		return k.Name, b, nil
	}, func(b []byte) proto.Message {
		m := &route.RouteConfiguration{}
		if err := unmarshalAnyValue(b, m); err != nil {
			return nil
		}
		return m
	})
}

// unmarshalAnyValue decodes the value of an Any-encoded message into m.
func unmarshalAnyValue(b []byte, m proto.Message) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == anyValue && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			return proto.Unmarshal(v, m)
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return fmt.Errorf("encode: Any without a value")
}

// Catch-all virtual hosts istiod appends to every sidecar outbound route
// configuration of a port: unknown hosts go to PassthroughCluster
// (ALLOW_ANY) or get a 502 (REGISTRY_ONLY).
var (
	catchAllAllowAny = mustCatchAll(true)
	catchAllBlockAll = mustCatchAll(false)
)

// CatchAllVirtualHost returns the cached part of the catch-all virtual
// host: "allow_any" when outbound traffic is allowed, else "block_all".
func CatchAllVirtualHost(allowAny bool) *Entry {
	if allowAny {
		return catchAllAllowAny
	}
	return catchAllBlockAll
}

// EgressCatchAllKey is the input of the "allow_any" virtual host that
// routes to a Sidecar's egressProxy cluster instead of PassthroughCluster.
type EgressCatchAllKey struct {
	Cluster string
}

// Hash feeds every field.
func (k *EgressCatchAllKey) Hash() uint64 {
	h := NewHasher("EgressCatchAllKey")
	h.Str(k.Cluster)
	return h.Sum()
}

// EgressCatchAllGen generates EgressCatchAllVirtualHost: a cached part like
// any other (a handful per mesh), swept with the rest when unused.
var EgressCatchAllGen = partGen(KindVirtualHost, EgressCatchAllVirtualHost)

// EgressCatchAllVirtualHost is the "allow_any" virtual host routing to
// k.Cluster.
func EgressCatchAllVirtualHost(_ index.Names, k *EgressCatchAllKey) (string, proto.Message) {
	vh := NewCatchAllVirtualHost(true)
	vh.Routes[0].GetRoute().ClusterSpecifier = &route.RouteAction_Cluster{Cluster: k.Cluster}
	return vh.Name, vh
}

// NewCatchAllVirtualHost is istiod's buildCatchAllVirtualHost.
func NewCatchAllVirtualHost(allowAny bool) *route.VirtualHost {
	if allowAny {
		return &route.VirtualHost{
			Name:    "allow_any",
			Domains: []string{"*"},
			Routes: []*route.Route{{
				Name:  "allow_any",
				Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_Route{Route: &route.RouteAction{
					ClusterSpecifier: &route.RouteAction_Cluster{Cluster: passthroughCluster},
					Timeout:          rtNoTimeout,
					MaxGrpcTimeout:   rtNoTimeout,
				}},
			}},
			IncludeRequestAttemptCount: true,
		}
	}
	return &route.VirtualHost{
		Name:    "block_all",
		Domains: []string{"*"},
		Routes: []*route.Route{{
			Name:   "block_all",
			Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_DirectResponse{DirectResponse: &route.DirectResponseAction{Status: 502}},
		}},
		IncludeRequestAttemptCount: true,
	}
}

func mustCatchAll(allowAny bool) *Entry {
	vh := NewCatchAllVirtualHost(allowAny)
	b, err := marshalBare(vh)
	if err != nil {
		panic(err)
	}
	return &Entry{Name: vh.Name, Version: vh.Name + "/" + strconv.Itoa(len(b)), Bytes: b}
}
