package loadgen

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The lazy decoder walks DiscoveryResponses in the protobuf wire format and
// extracts only what a proxy needs to follow names: each resource's name and
// the names it references (a Cluster's EDS service, a Listener's route
// configurations, a route configuration's clusters). It skips every other
// field by its length, so its cost is proportional to the number of fields
// it passes, not to the bytes: a 1,000-cluster CDS response costs tens of
// microseconds, not the milliseconds of a full unmarshal. It retains no
// response bytes: names are interned (symtab) before it returns.
//
// Field numbers are those of the envoy v3 protos; TestWireFieldNumbers checks
// each against the generated descriptors.

// Field numbers of the messages the decoder walks.
const (
	fResponseVersion  = 1 // DiscoveryResponse.version_info
	fResponseResource = 2 // DiscoveryResponse.resources (Any)
	fResponseTypeURL  = 4 // DiscoveryResponse.type_url
	fResponseNonce    = 5 // DiscoveryResponse.nonce

	fDeltaResource     = 2 // DeltaDiscoveryResponse.resources (Resource)
	fDeltaTypeURL      = 4 // DeltaDiscoveryResponse.type_url
	fDeltaNonce        = 5 // DeltaDiscoveryResponse.nonce
	fDeltaRemoved      = 6 // DeltaDiscoveryResponse.removed_resources (string)
	fDeltaRemovedNames = 8 // DeltaDiscoveryResponse.removed_resource_names (ResourceName)
	fDeltaVersion      = 1 // DeltaDiscoveryResponse.system_version_info

	fResourceVersion  = 1 // Resource.version
	fResourceResource = 2 // Resource.resource (Any)
	fResourceName     = 3 // Resource.name
	fResourceNameName = 1 // ResourceName.name

	fAnyTypeURL = 1 // Any.type_url
	fAnyValue   = 2 // Any.value

	fClusterName        = 1  // Cluster.name
	fClusterType        = 2  // Cluster.type (DiscoveryType)
	fClusterEDSConfig   = 3  // Cluster.eds_cluster_config
	fClusterClusterType = 38 // Cluster.cluster_type (CustomClusterType)
	fEDSServiceName     = 2  // Cluster.EdsClusterConfig.service_name
	clusterTypeEDS      = 3  // Cluster.DiscoveryType EDS

	fListenerName         = 1  // Listener.name
	fListenerFilterChains = 3  // Listener.filter_chains
	fListenerAPIListener  = 19 // Listener.api_listener
	fListenerDefaultChain = 25 // Listener.default_filter_chain
	fFilterChainFilters   = 3  // FilterChain.filters
	fFilterTypedConfig    = 4  // Filter.typed_config (Any)
	fAPIListenerAPIListen = 1  // ApiListener.api_listener (Any)
	fHCMRds               = 3  // HttpConnectionManager.rds
	fHCMRouteConfig       = 4  // HttpConnectionManager.route_config
	fRdsRouteConfigName   = 2  // Rds.route_config_name
	fRouteConfigName      = 1  // RouteConfiguration.name
	fRouteConfigVHosts    = 2  // RouteConfiguration.virtual_hosts
	fVHostRoutes          = 3  // VirtualHost.routes
	fRouteRoute           = 2  // Route.route (RouteAction)
	fRouteActionCluster   = 1  // RouteAction.cluster
	fRouteActionWeighted  = 3  // RouteAction.weighted_clusters
	fWeightedClusters     = 1  // WeightedCluster.clusters
	fClusterWeightName    = 1  // WeightedCluster.ClusterWeight.name
	fCLAClusterName       = 1  // ClusterLoadAssignment.cluster_name
	hcmTypeURL            = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
)

// refCluster marks a ref that names a cluster (a route's target, followed by
// proxyless gRPC clients); without it a ref names an EDS service (from a
// Cluster) or a route configuration (from a Listener).
const refCluster = 1 << 31

// ref is one (resource, referenced name) pair. A resource that references
// nothing is held as one ref with ref 0; one that references k names as k
// refs. Slices of refs are kept sorted by (name, ref).
type ref struct{ name, ref uint32 }

// response is one decoded DiscoveryResponse or DeltaDiscoveryResponse. It
// holds no bytes of the message: names are interned IDs.
type response struct {
	t         xtype
	typeURL   string // set only when t is typeOther
	version   []byte // copied: the message's bytes are gRPC's
	nonce     []byte
	size      int   // bytes of the message
	resources int   // resources in it
	entries   []ref // resources and their refs, in message order until sorted
	removed   []uint32
	invalid   int    // resources failing ValidateAll (full decode only)
	whyBad    string // the first failure
}

func (r *response) reset() {
	*r = response{entries: r.entries[:0], removed: r.removed[:0], version: r.version[:0], nonce: r.nonce[:0]}
}

// decoder decodes responses for the proxies of one run.
type decoder struct {
	syms *symtab
	// routeClusters: also walk route configurations (standalone and inline
	// in listeners) for the clusters they name; only proxyless gRPC clients
	// subscribe to CDS by name.
	routeClusters bool
	// full: also unmarshal every resource and run ValidateAll (see full.go).
	full bool
}

// field is one field of a message, as consumed by nextField.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	bytes  []byte // for BytesType
	varint uint64 // for VarintType
}

// nextField consumes one field from b into f and returns the rest; ok is
// false on malformed input.
//
// Most fields the decoder passes have a one-byte tag and a one-byte length
// or varint: those are read inline, the rest by protowire.
func nextField(b []byte, f *field) (rest []byte, ok bool) {
	if len(b) >= 2 && b[0] < 0x80 && b[0] >= 1<<3 && b[1] < 0x80 {
		switch typ := protowire.Type(b[0] & 7); typ {
		case protowire.BytesType:
			if n := int(b[1]); n <= len(b)-2 {
				f.num, f.typ, f.bytes = protowire.Number(b[0]>>3), typ, b[2:2+n:2+n]
				return b[2+n:], true
			}
		case protowire.VarintType:
			f.num, f.typ, f.varint = protowire.Number(b[0]>>3), typ, uint64(b[1])
			return b[2:], true
		}
	}
	return nextFieldSlow(b, f)
}

func nextFieldSlow(b []byte, f *field) (rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return nil, false
	}
	b = b[n:]
	f.num, f.typ = num, typ
	switch typ {
	case protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, false
		}
		f.bytes = v
		return b[n:], true
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, false
		}
		f.varint = v
		return b[n:], true
	default:
		n := protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, false
		}
		return b[n:], true
	}
}

func errMalformed(what string) error {
	return fmt.Errorf("%w: %s", ErrDecode, what)
}

// decodeSotW decodes a DiscoveryResponse into r.
func (d *decoder) decodeSotW(b []byte, r *response) error {
	r.reset()
	r.size = len(b)
	var typeURL []byte
	all := b
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return errMalformed("DiscoveryResponse")
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fResponseVersion:
			r.version = append(r.version[:0], f.bytes...)
		case fResponseResource:
			r.resources++
			if err := d.any(f.bytes, r, 0); err != nil {
				return err
			}
		case fResponseTypeURL:
			typeURL = f.bytes
		case fResponseNonce:
			r.nonce = append(r.nonce[:0], f.bytes...)
		}
	}
	r.setType(typeURL)
	if d.full {
		n, why, err := validateSotW(all)
		if err != nil {
			return err
		}
		r.invalid, r.whyBad = n, why
	}
	return nil
}

// decodeDelta decodes a DeltaDiscoveryResponse into r.
func (d *decoder) decodeDelta(b []byte, r *response) error {
	r.reset()
	r.size = len(b)
	var typeURL []byte
	all := b
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return errMalformed("DeltaDiscoveryResponse")
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fDeltaVersion:
			r.version = append(r.version[:0], f.bytes...)
		case fDeltaResource:
			r.resources++
			if err := d.deltaResource(f.bytes, r); err != nil {
				return err
			}
		case fDeltaTypeURL:
			typeURL = f.bytes
		case fDeltaNonce:
			r.nonce = append(r.nonce[:0], f.bytes...)
		case fDeltaRemoved:
			r.removed = append(r.removed, d.syms.id(f.bytes))
		case fDeltaRemovedNames:
			if name := bytesField(f.bytes, fResourceNameName); name != nil {
				r.removed = append(r.removed, d.syms.id(name))
			}
		}
	}
	r.setType(typeURL)
	if d.full {
		n, why, err := validateDelta(all)
		if err != nil {
			return err
		}
		r.invalid, r.whyBad = n, why
	}
	return nil
}

// deltaResource decodes one Resource of a delta response. The Resource's
// name wins over the name inside the resource; a Resource without a body
// says the resource does not exist, which is a removal.
func (d *decoder) deltaResource(b []byte, r *response) error {
	var name, body []byte
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return errMalformed("Resource")
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fResourceName:
			name = f.bytes
		case fResourceResource:
			body = f.bytes
		}
	}
	if body == nil {
		if name != nil {
			r.removed = append(r.removed, d.syms.id(name))
		}
		return nil
	}
	var id uint32
	if len(name) > 0 {
		id = d.syms.id(name)
	}
	return d.any(body, r, id)
}

// any decodes one resource in an Any, appending its refs to r.entries. A
// non-zero name overrides the name found inside the resource.
func (d *decoder) any(b []byte, r *response, name uint32) error {
	var typeURL, value []byte
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return errMalformed("Any")
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fAnyTypeURL:
			typeURL = f.bytes
		case fAnyValue:
			value = f.bytes
		}
	}
	start := len(r.entries)
	var own []byte
	var err error
	switch typeOfURL(typeURL) {
	case typeCDS:
		own, err = d.cluster(value, r)
	case typeEDS:
		own = bytesField(value, fCLAClusterName)
	case typeLDS:
		own, err = d.listener(value, r)
	case typeRDS:
		own, err = d.routeConfig(value, r)
	default:
		// A type loadgen does not follow (SDS, ECDS, ...): counted, not held.
		return nil
	}
	if err != nil {
		return err
	}
	if name == 0 {
		name = d.syms.id(own)
	}
	if len(r.entries) == start {
		r.entries = append(r.entries, ref{name: name})
		return nil
	}
	for i := start; i < len(r.entries); i++ {
		r.entries[i].name = name
	}
	return nil
}

// cluster decodes a Cluster: its name, and for an EDS cluster a ref to its
// EDS service name (eds_cluster_config.service_name, or the cluster name).
//
// The walk stops once the name, the discovery type and (for EDS) the EDS
// config are seen: encoders that write fields in number order (vtprotobuf,
// pilotfish's direct encoder) put all three first, and the rest of a
// cluster (TLS contexts, metadata, filters: most of its bytes) is then not
// read. type and cluster_type are one oneof, so a cluster with a type has
// no custom type further on. An encoding that repeats these fields later
// (never done by a real encoder) would be read by its first values.
func (d *decoder) cluster(b []byte, r *response) (name []byte, err error) {
	var discoveryType uint64 // STATIC unless set
	var custom, typed, eds bool
	var service []byte
	var f field
	for len(b) > 0 && (name == nil || !typed || (discoveryType == clusterTypeEDS && !eds)) {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return nil, errMalformed("Cluster")
		}
		switch {
		case f.num == fClusterName && f.typ == protowire.BytesType:
			name = f.bytes
		case f.num == fClusterType && f.typ == protowire.VarintType:
			discoveryType, typed = f.varint, true
		case f.num == fClusterClusterType:
			custom = true
		case f.num == fClusterEDSConfig && f.typ == protowire.BytesType:
			service, eds = bytesField(f.bytes, fEDSServiceName), true
		}
	}
	if custom || discoveryType != clusterTypeEDS {
		return name, nil
	}
	if len(service) == 0 {
		service = name
	}
	r.entries = append(r.entries, ref{ref: d.syms.id(service)})
	return name, nil
}

// listener decodes a Listener: its name and the route configurations its
// HTTP connection managers name, in filter chains, the default filter chain
// and the api_listener (proxyless gRPC). With routeClusters, inline route
// configurations add refs to the clusters they route to.
func (d *decoder) listener(b []byte, r *response) (name []byte, err error) {
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return nil, errMalformed("Listener")
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fListenerName:
			name = f.bytes
		case fListenerFilterChains, fListenerDefaultChain:
			if err := d.filterChain(f.bytes, r); err != nil {
				return nil, err
			}
		case fListenerAPIListener:
			if hcm := anyOfType(bytesField(f.bytes, fAPIListenerAPIListen), hcmTypeURL); hcm != nil {
				if err := d.hcm(hcm, r); err != nil {
					return nil, err
				}
			}
		}
	}
	return name, nil
}

func (d *decoder) filterChain(b []byte, r *response) error {
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return errMalformed("FilterChain")
		}
		if f.num != fFilterChainFilters || f.typ != protowire.BytesType {
			continue
		}
		if hcm := anyOfType(bytesField(f.bytes, fFilterTypedConfig), hcmTypeURL); hcm != nil {
			if err := d.hcm(hcm, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// hcm decodes an HttpConnectionManager: rds.route_config_name, and with
// routeClusters the clusters of an inline route_config.
func (d *decoder) hcm(b []byte, r *response) error {
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return errMalformed("HttpConnectionManager")
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fHCMRds:
			if name := bytesField(f.bytes, fRdsRouteConfigName); len(name) > 0 {
				r.entries = append(r.entries, ref{ref: d.syms.id(name)})
			}
		case fHCMRouteConfig:
			if d.routeClusters {
				if _, err := d.routeConfig(f.bytes, r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// routeConfig decodes a RouteConfiguration: its name, and with
// routeClusters refs to the clusters its routes name.
func (d *decoder) routeConfig(b []byte, r *response) (name []byte, err error) {
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return nil, errMalformed("RouteConfiguration")
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fRouteConfigName:
			name = f.bytes
		case fRouteConfigVHosts:
			if d.routeClusters {
				if err := d.virtualHost(f.bytes, r); err != nil {
					return nil, err
				}
			}
		}
	}
	return name, nil
}

func (d *decoder) virtualHost(b []byte, r *response) error {
	var f, g, h field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return errMalformed("VirtualHost")
		}
		if f.num != fVHostRoutes || f.typ != protowire.BytesType {
			continue
		}
		action := bytesField(f.bytes, fRouteRoute)
		for len(action) > 0 {
			if action, ok = nextField(action, &g); !ok {
				return errMalformed("RouteAction")
			}
			if g.typ != protowire.BytesType {
				continue
			}
			switch g.num {
			case fRouteActionCluster:
				r.entries = append(r.entries, ref{ref: d.syms.id(g.bytes) | refCluster})
			case fRouteActionWeighted:
				wc := g.bytes
				for len(wc) > 0 {
					if wc, ok = nextField(wc, &h); !ok {
						return errMalformed("WeightedCluster")
					}
					if h.num == fWeightedClusters && h.typ == protowire.BytesType {
						if name := bytesField(h.bytes, fClusterWeightName); len(name) > 0 {
							r.entries = append(r.entries, ref{ref: d.syms.id(name) | refCluster})
						}
					}
				}
			}
		}
	}
	return nil
}

// bytesField returns the last occurrence of length-delimited field num (a
// string or a message) of message b; nil if absent or malformed.
func bytesField(b []byte, num protowire.Number) []byte {
	var out []byte
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return out
		}
		if f.num == num && f.typ == protowire.BytesType {
			out = f.bytes
		}
	}
	return out
}

// anyOfType returns the value of Any b if its type URL is typeURL.
func anyOfType(b []byte, typeURL string) []byte {
	if b == nil {
		return nil
	}
	var url, value []byte
	var f field
	for len(b) > 0 {
		var ok bool
		if b, ok = nextField(b, &f); !ok {
			return nil
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fAnyTypeURL:
			url = f.bytes
		case fAnyValue:
			value = f.bytes
		}
	}
	if string(url) != typeURL {
		return nil
	}
	if value == nil {
		return []byte{}
	}
	return value
}
