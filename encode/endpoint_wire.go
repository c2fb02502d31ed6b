package encode

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protowire"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// AppendClusterLoadAssignment appends the ClusterLoadAssignment that
// [ClusterLoadAssignment] builds for k, encoded, to dst — without building
// it. Endpoints are the bulk of EDS and of the endpoint fast path, and a
// protobuf message per endpoint (seven with its nested messages, plus
// metadata) costs more than the encoding itself; here each endpoint is a
// few appends. ClusterLoadAssignment stays the reference: verify mode
// checks on every generation that both describe the same message.
//
// Fields are written in field-number order and map entries sorted by key,
// as deterministic protobuf marshaling does.
func AppendClusterLoadAssignment(dst []byte, k *EndpointsKey) (string, []byte) {
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // cluster_name
	dst = protowire.AppendString(dst, k.ClusterName)
	svc := k.Service
	if svc == nil || k.Shard == nil || svc.PortByNumber(k.Port.Number) == nil ||
		svc.Resolution == index.ResolutionDNS || svc.Resolution == index.ResolutionDNSRoundRobin {
		return k.ClusterName, dst
	}
	in := &epInput{
		syms: k.Syms, labels: k.Labels, svc: svc, shard: k.Shard, port: k.Port,
		subsetLabels: k.SubsetLabels, mtlsDisabled: k.MTLSDisabled, sendUnhealthy: k.SendUnhealthy,
		clusterID: k.ClusterID,
	}
	cands := epCollect(in)
	if len(cands) == 0 {
		return k.ClusterName, dst
	}

	// Locality groups; locality load balancing works on their weights and
	// priorities, so they are messages (a handful per assignment).
	var locs []*endpointv3.LocalityLbEndpoints
	var starts []int
	for i := range cands {
		if i == 0 || cands[i].locality != cands[i-1].locality {
			locs = append(locs, &endpointv3.LocalityLbEndpoints{Locality: epParseLocality(cands[i].locality), LoadBalancingWeight: clU32(0)})
			starts = append(starts, i)
		}
		w := uint32(cands[i].ep.Weight)
		if w == 0 {
			w = 1
		}
		lw := locs[len(locs)-1].LoadBalancingWeight
		if sum := lw.Value + w; sum >= lw.Value {
			lw.Value = sum
		} else {
			lw.Value = 1<<32 - 1 // istiod saturates on overflow
		}
	}
	starts = append(starts, len(cands))
	// As ClusterLoadAssignment: no rule means the mesh default setting.
	var lb *networking.LoadBalancerSettings
	if dr := clDestinationRule(k.LocalityDR); dr != nil {
		var subset *networking.Subset
		if k.Subset != "" {
			subset = clFindSubset(dr, k.Subset)
		}
		lb = clResolvePolicy(dr, k.Port.Number, subset).loadBalancer
	}
	var dropped []bool
	if setting, ok := epEffectiveLocalityLB(lb); ok {
		dropped = epApplyLocalityLB(locs, k.Locality, setting, k.Failover)
	}

	e := epEncoder{in: in, svcName: epServiceEntryName(in), ns: k.Syms.String(svc.Key.Namespace), lk: epNewLabelKeys(k.Syms)}
	// An endpoint encodes to about 100 bytes: size the buffers once.
	const perEndpoint = 128
	dst = growBytes(dst, len(cands)*perEndpoint+16*len(locs))
	body := make([]byte, 0, (starts[1]-starts[0])*perEndpoint)
	for li, loc := range locs {
		body = body[:0]
		body = appendLocality(body, loc.Locality)
		if dropped == nil || !dropped[li] {
			for i := starts[li]; i < starts[li+1]; i++ {
				body = e.appendLbEndpoint(body, &cands[i])
			}
		}
		body = appendUInt32Value(body, 3, loc.LoadBalancingWeight.GetValue())
		if loc.Priority != 0 {
			body = protowire.AppendTag(body, 5, protowire.VarintType)
			body = protowire.AppendVarint(body, uint64(loc.Priority))
		}
		dst = protowire.AppendTag(dst, 2, protowire.BytesType) // endpoints
		dst = protowire.AppendBytes(dst, body)
	}
	return k.ClusterName, dst
}

// epEncoder encodes the endpoints of one assignment, sharing the metadata
// of endpoints of one workload.
type epEncoder struct {
	in      *epInput
	svcName string
	ns      string
	lk      epLabelKeys
	metas   map[epMetaKey][]byte
	arena   []byte // encoded metadata of this assignment's workloads
	addr    []byte
}

// appendLbEndpoint appends lb_endpoints (field 2 of LocalityLbEndpoints).
func (e *epEncoder) appendLbEndpoint(dst []byte, c *epCandidate) []byte {
	in := e.in
	e.addr = e.addr[:0]
	if c.ep.Addr.IsValid() {
		e.addr = c.ep.Addr.AppendTo(e.addr)
	} else {
		e.addr = append(e.addr, in.syms.String(c.ep.Hostname)...)
	}
	// SocketAddress{address: 2, port_value: 3}
	sock := sizeBytesField(len(e.addr))
	if c.port != 0 {
		sock += protowire.SizeTag(3) + protowire.SizeVarint(uint64(c.port))
	}
	addrMsg := sizeBytesField(sock)  // Address{socket_address: 1}
	epMsg := sizeBytesField(addrMsg) // Endpoint{address: 1}
	health := epHealth(in.svc, c.ep)
	md := e.metadata(c)
	w := uint32(c.ep.Weight)
	if w == 0 {
		w = 1
	}
	size := sizeBytesField(epMsg) + sizeBytesField(len(md)) + sizeUInt32Value(4, w)
	if health != 0 {
		size += protowire.SizeTag(2) + protowire.SizeVarint(uint64(health))
	}

	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // endpoint
	dst = protowire.AppendVarint(dst, uint64(epMsg))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // address
	dst = protowire.AppendVarint(dst, uint64(addrMsg))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // socket_address
	dst = protowire.AppendVarint(dst, uint64(sock))
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendBytes(dst, e.addr)
	if c.port != 0 {
		dst = protowire.AppendTag(dst, 3, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(c.port))
	}
	if health != 0 {
		dst = protowire.AppendTag(dst, 2, protowire.VarintType) // health_status
		dst = protowire.AppendVarint(dst, uint64(health))
	}
	dst = protowire.AppendTag(dst, 3, protowire.BytesType) // metadata
	dst = protowire.AppendBytes(dst, md)
	return appendUInt32Value(dst, 4, w) // load_balancing_weight
}

// metadata returns the encoded Metadata of an endpoint (epMetadata's
// message): filter_metadata entries sorted by key.
func (e *epEncoder) metadata(c *epCandidate) []byte {
	in := e.in
	wl := ""
	switch {
	case c.ep.Workload != 0:
		wl = epWorkloadName(in.syms, in.labels, &e.lk, c.ep.Labels, in.syms.String(c.ep.Workload))
	case c.inline:
		wl = e.svcName + "-" + strconv.Itoa(int(c.seq))
	}
	mk := epMetaKey{tls: c.ep.TLSMode == index.TLSModeIstio && !in.mtlsDisabled, workload: wl, labels: c.ep.Labels}
	if md, ok := e.metas[mk]; ok {
		return md
	}
	name, rev := epCanonicalService(in.syms, in.labels, &e.lk, mk.labels, mk.workload)
	if rev == "latest" {
		rev = ""
	}
	// Metadata of all workloads share one arena: one allocation per
	// assignment, not one per workload. Earlier slices stay valid when the
	// arena grows (they keep the old array).
	start := len(e.arena)
	if mk.tls {
		e.arena = appendStructEntry(e.arena, "envoy.transport_socket_match", "tlsMode", [5]string{"istio"})
	}
	e.arena = appendStructEntry(e.arena, "istio", "workload", [5]string{mk.workload, ";" + e.ns + ";", name, ";" + rev + ";", in.clusterID})
	md := e.arena[start:len(e.arena):len(e.arena)]
	if e.metas == nil {
		e.metas = map[epMetaKey][]byte{}
	}
	e.metas[mk] = md
	return md
}

// appendStructEntry appends a filter_metadata map entry (field 1 of
// Metadata) whose value is a Struct with one string field, the
// concatenation of value's parts.
func appendStructEntry(dst []byte, key, field string, value [5]string) []byte {
	n := 0
	for _, p := range value {
		n += len(p)
	}
	// Value{string_value: 3}
	val := sizeBytesField(n)
	// Struct.fields entry {key: 1, value: 2}
	fieldEntry := sizeBytesField(len(field)) + sizeBytesField(val)
	strct := sizeBytesField(fieldEntry) // Struct{fields: 1}
	entry := sizeBytesField(len(key)) + sizeBytesField(strct)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(entry))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, key)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(strct))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(fieldEntry))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, field)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(val))
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(n))
	for _, p := range value {
		dst = append(dst, p...)
	}
	return dst
}

// appendLocality appends locality (field 1 of LocalityLbEndpoints), present
// even when empty: grpc-go rejects a missing one.
func appendLocality(dst []byte, l *corev3.Locality) []byte {
	size := 0
	for _, s := range [...]string{l.GetRegion(), l.GetZone(), l.GetSubZone()} {
		if s != "" {
			size += sizeBytesField(len(s))
		}
	}
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	for i, s := range [...]string{l.GetRegion(), l.GetZone(), l.GetSubZone()} {
		if s != "" {
			dst = protowire.AppendTag(dst, protowire.Number(i+1), protowire.BytesType)
			dst = protowire.AppendString(dst, s)
		}
	}
	return dst
}

// appendUInt32Value appends a google.protobuf.UInt32Value field.
func appendUInt32Value(dst []byte, num protowire.Number, v uint32) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	if v == 0 {
		return protowire.AppendVarint(dst, 0)
	}
	dst = protowire.AppendVarint(dst, uint64(1+protowire.SizeVarint(uint64(v))))
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(v))
}

func sizeUInt32Value(num protowire.Number, v uint32) int {
	n := 0
	if v != 0 {
		n = 1 + protowire.SizeVarint(uint64(v))
	}
	return sizeBytesField(n) - 1 + protowire.SizeTag(num)
}

// sizeBytesField is the size of a length-delimited field with a one-byte
// tag (field numbers below 16) and n bytes of payload.
func sizeBytesField(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// growBytes returns b with room for n more bytes.
func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	out := make([]byte, len(b), len(b)+n)
	copy(out, b)
	return out
}
