package encode

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// AppendClusterLoadAssignment returns a new buffer holding prefix followed
// by the ClusterLoadAssignment that [ClusterLoadAssignment] builds for k,
// as the value of a length-delimited field (its size, then its encoding) —
// without building the message. Endpoints are the bulk of EDS and of the
// endpoint fast path, and a protobuf message per endpoint (seven with its
// nested messages, plus metadata) costs more than the encoding itself.
//
// It works in two passes over the endpoints: the first sizes every nested
// message, the second writes into one buffer of the exact size, so an
// assignment costs one allocation whatever its endpoint count (working
// memory is pooled). ClusterLoadAssignment stays the reference: verify
// mode checks on every generation that both describe the same message.
//
// Fields are written in field-number order and map entries sorted by key,
// as deterministic protobuf marshaling does.
func AppendClusterLoadAssignment(prefix []byte, n index.Names, k *EndpointsKey) (string, []byte) {
	size := sizeBytesField(len(k.ClusterName)) // cluster_name
	svc := k.Service
	if svc == nil || k.Shard == nil || svc.PortByNumber(k.Port.Number) == nil ||
		svc.Resolution == index.ResolutionDNS || svc.Resolution == index.ResolutionDNSRoundRobin {
		return k.ClusterName, appendCLAHead(prefix, k.ClusterName, size)
	}
	s := epScratchPool.Get().(*epScratch)
	defer s.release()
	s.in = epInput{
		names: n, svc: svc, shard: k.Shard, port: k.Port,
		subsetLabels: k.SubsetLabels, mtlsDisabled: k.MTLSDisabled, sendUnhealthy: k.SendUnhealthy,
		clusterID: k.ClusterID,
	}
	s.cands = epCollectInto(&s.in, s.cands[:0])
	if len(s.cands) == 0 {
		return k.ClusterName, appendCLAHead(prefix, k.ClusterName, size)
	}
	if f := epNewFailover(k); f != nil {
		s.prioritize(f)
	}
	s.groupLocalities()
	s.applyLocalityLB(k)

	// Pass 1: sizes.
	w := epWriter{in: &s.in, svcName: epServiceEntryName(&s.in), ns: n.String(svc.Key.Namespace)}
	s.metas = slicesGrow(s.metas[:0], len(s.cands))
	for li := range s.locs {
		loc := &s.locs[li]
		n := sizeBytesField(loc.localitySize())
		if !loc.dropped {
			for i := loc.start; i < loc.end; i++ {
				n += sizeBytesField(w.measure(&s.cands[i], &s.metas[i]))
			}
		}
		n += sizeUInt32Value(3, loc.weight)
		if loc.priority != 0 {
			n += protowire.SizeTag(5) + protowire.SizeVarint(uint64(loc.priority))
		}
		loc.size = n
		size += sizeBytesField(n)
	}

	// Pass 2: the bytes.
	dst := appendCLAHead(prefix, k.ClusterName, size)
	for li := range s.locs {
		loc := &s.locs[li]
		dst = protowire.AppendTag(dst, 2, protowire.BytesType) // endpoints
		dst = protowire.AppendVarint(dst, uint64(loc.size))
		dst = loc.appendLocality(dst)
		if !loc.dropped {
			for i := loc.start; i < loc.end; i++ {
				dst = w.appendLbEndpoint(dst, &s.cands[i], &s.metas[i])
			}
		}
		dst = appendUInt32Value(dst, 3, loc.weight)
		if loc.priority != 0 {
			dst = protowire.AppendTag(dst, 5, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(loc.priority))
		}
	}
	return k.ClusterName, dst
}

// appendCLAHead allocates the assignment's buffer (prefix, the message's
// size, then size bytes) and writes prefix, the size and cluster_name.
func appendCLAHead(prefix []byte, name string, size int) []byte {
	dst := make([]byte, 0, len(prefix)+protowire.SizeVarint(uint64(size))+size)
	dst = append(dst, prefix...)
	dst = protowire.AppendVarint(dst, uint64(size))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // cluster_name
	return protowire.AppendString(dst, name)
}

// epScratch is the working memory of one AppendClusterLoadAssignment call.
type epScratch struct {
	in    epInput
	cands []epCandidate
	metas []epWireMeta
	locs  []epWireLocality
}

var epScratchPool = sync.Pool{New: func() any { return new(epScratch) }}

// release drops the references into the snapshot (rows, strings) so the
// pool keeps no snapshot alive, and returns s to the pool.
func (s *epScratch) release() {
	clear(s.cands)
	clear(s.metas)
	clear(s.locs)
	s.in = epInput{}
	epScratchPool.Put(s)
}

func slicesGrow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// epWireLocality is one LocalityLbEndpoints: cands[start:end].
type epWireLocality struct {
	region, zone, subZone string
	start, end            int
	weight, priority      uint32
	dropped               bool
	size                  int // of the encoded message
}

// prioritize sets each candidate's failoverPriority priority and orders
// each locality's candidates by it (stable: in a priority, they keep their
// order), so that groupLocalities makes one group per locality and
// priority, as istiod's split does.
func (s *epScratch) prioritize(f *epFailover) {
	start := 0
	for i := range s.cands {
		c := &s.cands[i]
		c.prio = f.priority(s.in.names, c.ep)
		if i+1 == len(s.cands) || s.cands[i+1].locality != c.locality {
			slices.SortStableFunc(s.cands[start:i+1], func(a, b epCandidate) int { return cmp.Compare(a.prio, b.prio) })
			start = i + 1
		}
	}
}

// groupLocalities splits the sorted candidates into locality groups (and
// priority groups, after prioritize), summing weights as istiod does
// (saturating on overflow), and ranks the groups' priorities.
func (s *epScratch) groupLocalities() {
	s.locs = s.locs[:0]
	split := false
	for i := range s.cands {
		c := &s.cands[i]
		if i == 0 || c.locality != s.cands[i-1].locality || c.prio != s.cands[i-1].prio {
			if i > 0 {
				s.locs[len(s.locs)-1].end = i
			}
			region, rest, _ := strings.Cut(c.locality, "/")
			zone, subZone, _ := strings.Cut(rest, "/")
			s.locs = append(s.locs, epWireLocality{region: region, zone: zone, subZone: subZone, start: i, priority: uint32(c.prio)})
			split = split || c.prio != 0
		}
		w := uint32(c.ep.Weight)
		if w == 0 {
			w = 1
		}
		loc := &s.locs[len(s.locs)-1]
		loc.weight = epAddWeight(loc.weight, w)
	}
	s.locs[len(s.locs)-1].end = len(s.cands)
	if split {
		s.rankPriorities()
	}
}

// rankPriorities ranks the groups' priorities 0..m-1 (epRankPriorities).
func (s *epScratch) rankPriorities() {
	p := make([]uint32, len(s.locs))
	for i := range s.locs {
		p[i] = s.locs[i].priority
	}
	epRankPriorities(p)
	for i := range s.locs {
		s.locs[i].priority = p[i]
	}
}

// applyLocalityLB applies locality failover priorities or a locality
// weight distribution, as ClusterLoadAssignment does. It runs on the
// locality messages the reference uses; they are built only when a
// setting applies (a DestinationRule with outlier detection or a
// distribution), which is rare.
func (s *epScratch) applyLocalityLB(k *EndpointsKey) {
	setting, ok := epEffectiveLocalityLB(k.loadBalancer(), k.MeshLocality)
	if !ok || (setting.GetDistribute() == nil && !k.Failover) {
		return
	}
	msgs := make([]*endpointv3.LocalityLbEndpoints, len(s.locs))
	for i, l := range s.locs {
		msgs[i] = &endpointv3.LocalityLbEndpoints{
			Locality:            &corev3.Locality{Region: l.region, Zone: l.zone, SubZone: l.subZone},
			LoadBalancingWeight: clU32(l.weight),
			Priority:            l.priority,
		}
	}
	dropped := epApplyLocalityLB(msgs, k.Locality, setting, k.Failover)
	for i, m := range msgs {
		s.locs[i].weight = m.GetLoadBalancingWeight().GetValue()
		s.locs[i].priority = m.GetPriority()
		s.locs[i].dropped = dropped != nil && dropped[i]
	}
}

// localitySize is the size of the encoded Locality message.
func (l *epWireLocality) localitySize() int {
	n := 0
	for _, s := range [...]string{l.region, l.zone, l.subZone} {
		if s != "" {
			n += sizeBytesField(len(s))
		}
	}
	return n
}

// appendLocality appends locality (field 1 of LocalityLbEndpoints), present
// even when empty: grpc-go rejects a missing one.
func (l *epWireLocality) appendLocality(dst []byte) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(l.localitySize()))
	for i, s := range [...]string{l.region, l.zone, l.subZone} {
		if s != "" {
			dst = protowire.AppendTag(dst, protowire.Number(i+1), protowire.BytesType)
			dst = protowire.AppendString(dst, s)
		}
	}
	return dst
}
