package encode

import (
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

// A gateway virtual host is encoded directly: its name, domains, the
// encoded routes, require_tls and include_request_attempt_count, in field
// order. The routes are the costly part, and they are often shared: a
// Gateway with an HTTP and an HTTPS server for the same hosts gets the same
// routes in http.80 and in its https.443 configuration when no route
// depends on the listener port. RoutesHash names the routes so that a build
// translates and marshals them once per distinct hash.

// VirtualHost field numbers (envoy.config.route.v3.VirtualHost).
const (
	vhName                       protowire.Number = 1
	vhDomains                    protowire.Number = 2
	vhRequireTLS                 protowire.Number = 4
	vhIncludeRequestAttemptCount protowire.Number = 14
)

// RoutesHash identifies the routes of k's virtual host: every input of
// gatewayRoutes, the port only when some route depends on it.
func (k *GatewayVirtualHostKey) RoutesHash() uint64 {
	h := NewHasher("GatewayRoutes")
	h.Str(k.Namespace)
	h.Str(k.DomainSuffix)
	if k.routesPortFree() {
		h.U32(0)
	} else {
		h.U32(k.Port)
	}
	h.Int(len(k.Sources))
	for i := range k.Sources {
		h.Str(k.Sources[i].Gateway)
		hashCfgRow(&h, k.Sources[i].VirtualService)
	}
	hashSvcRows(&h, k.Destinations)
	return h.Sum()
}

// routesPortFree reports whether k's routes are the same on every port.
// The listener port enters a gateway route through a match's port, a
// redirect, the cluster of a destination without a port (unless its
// service has one port), an ExternalName destination, and the decorator of
// a route without a single destination cluster; a route using none of these
// is port-free. Conservative: false means only that sharing is not tried.
func (k *GatewayVirtualHostKey) routesPortFree() bool {
	for _, d := range k.Destinations {
		if d.ExternalName != 0 {
			return false
		}
	}
	var ports map[string]uint32
	destFree := func(d *networking.Destination, vsNS string) bool {
		if d.GetHost() == "" {
			return false
		}
		if d.GetPort() != nil {
			return true
		}
		if ports == nil {
			ports = k.onlyPorts()
		}
		_, ok := ports[rtResolveHost(d.GetHost(), vsNS, k.DomainSuffix)]
		return ok
	}
	for i := range k.Sources {
		c := k.Sources[i].VirtualService
		vs, _ := c.Spec.(*networking.VirtualService)
		if vs == nil {
			continue
		}
		vsNS := k.Syms.String(c.Key.Namespace)
		for _, in := range vs.GetHttp() {
			if in.GetDelegate() != nil {
				continue // dropped (route.go)
			}
			if in.GetRedirect() != nil || in.GetDirectResponse() != nil || len(in.GetRoute()) != 1 {
				return false
			}
			for _, m := range in.GetMatch() {
				if m.GetPort() != 0 {
					return false
				}
			}
			if !destFree(in.GetRoute()[0].GetDestination(), vsNS) {
				return false
			}
			if in.GetMirror() != nil && !destFree(in.GetMirror(), vsNS) {
				return false
			}
			for _, m := range in.GetMirrors() {
				if m.GetDestination() != nil && !destFree(m.GetDestination(), vsNS) {
					return false
				}
			}
		}
	}
	return true
}

// AppendGatewayRoutes appends the encoding of k's routes as the routes
// field of a VirtualHost (each route tagged and length-prefixed).
func AppendGatewayRoutes(dst []byte, k *GatewayVirtualHostKey) ([]byte, error) {
	vh := &route.VirtualHost{Routes: gatewayRoutes(k)}
	if vt, ok := any(vh).(vtMarshaler); ok {
		return marshalVT(dst, vt, vh)
	}
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, vh)
}

// AppendGatewayVirtualHost appends the encoding of GatewayVirtualHost(k)
// given its encoded routes (AppendGatewayRoutes of a key with k's
// RoutesHash).
func AppendGatewayVirtualHost(dst []byte, k *GatewayVirtualHostKey, routes []byte) (string, []byte) {
	name := k.Name()
	n := protowire.SizeTag(vhName) + protowire.SizeBytes(len(name)) + len(routes) + 4
	for _, d := range k.Hosts {
		n += protowire.SizeTag(vhDomains) + protowire.SizeBytes(len(d))
	}
	if dst == nil {
		dst = make([]byte, 0, n)
	}
	if name != "" {
		dst = protowire.AppendTag(dst, vhName, protowire.BytesType)
		dst = protowire.AppendString(dst, name)
	}
	for _, d := range k.Hosts {
		dst = protowire.AppendTag(dst, vhDomains, protowire.BytesType)
		dst = protowire.AppendString(dst, d)
	}
	dst = append(dst, routes...)
	if k.RequireTLS {
		dst = protowire.AppendTag(dst, vhRequireTLS, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(route.VirtualHost_ALL))
	}
	dst = protowire.AppendTag(dst, vhIncludeRequestAttemptCount, protowire.VarintType)
	return name, protowire.AppendVarint(dst, 1)
}
