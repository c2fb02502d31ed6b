package encode

import (
	"cmp"
	"slices"
	"strconv"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// EndpointsGen generates EndpointsKey's assignment, encoded directly.
var EndpointsGen = resourceGenAppend(KindEndpoint, ClusterLoadAssignmentType, ClusterLoadAssignment, AppendClusterLoadAssignment)

// ClusterLoadAssignmentType is the type URL of EDS resources.
const ClusterLoadAssignmentType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"

// EndpointsKey holds every input of [ClusterLoadAssignment]. Proxy-specific
// inputs (Locality, FailoverLabels) are set only when they change the
// output, so that proxies of every locality and labels share one encoding
// otherwise.
type EndpointsKey struct {
	// ClusterName is the requested cluster name, echoed as the CLA's name.
	ClusterName string
	// Service is nil when the cluster names no visible service: the CLA is
	// then empty, as istiod sends it.
	Service *index.Service
	// Shard holds the service's endpoints (nil: none).
	Shard *index.EndpointShard
	// Port is the service port of the cluster.
	Port index.Port
	// Subset and SubsetLabels: the DestinationRule subset and its interned
	// labels (0: every endpoint).
	Subset       string
	SubsetLabels index.LabelSetID
	// MTLSDisabled drops the tlsMode transport-socket-match metadata: the
	// DestinationRule sets a TLS mode other than ISTIO_MUTUAL for this
	// port/subset, or PeerAuthentication disables mTLS for the service.
	MTLSDisabled bool
	// SendUnhealthy includes unhealthy endpoints (as UNHEALTHY), istiod's
	// default unless outlier detection sets minHealthPercent > 0.
	SendUnhealthy bool
	// Failover: outlier detection is on for the cluster, so endpoints get
	// priorities by locality relative to the proxy.
	Failover bool
	// Locality is the proxy's "region/zone/subzone", set only when Failover
	// or a locality distribution applies.
	Locality string
	// LocalityDR is the DestinationRule whose localityLbSetting applies to
	// this port/subset (nil: the mesh default, enabled with no rules).
	LocalityDR *index.Config
	// MeshLocality is the mesh's localityLbSetting (Mesh.LocalityLB, nil:
	// istiod's default), set by the caller before ApplyDestinationRule,
	// which drops it when LocalityDR's setting applies instead.
	MeshLocality *LocalityLB
	// FailoverLabels is the proxy's value of the label each entry of the
	// applicable failoverPriority names (FailoverPriority), in order, each
	// ended by a newline, from istiod's augmented proxy labels (topology
	// keys from its locality, network and cluster). "" when no
	// failoverPriority applies or the proxy has no labels at all (istiod
	// then assigns no priorities by label). Set by the caller after
	// ApplyDestinationRule.
	FailoverLabels string
	// ClusterID is the endpoints' cluster (istiod's "Kubernetes" by
	// default), reported in the istio workload metadata.
	ClusterID string
}

// Hash feeds every field of the key (0 allocations).
func (k *EndpointsKey) Hash() uint64 {
	h := NewHasher("endpoints")
	h.Str(k.ClusterName)
	clHashService(&h, k.Service)
	clHashShard(&h, k.Shard)
	clHashPort(&h, k.Port)
	h.Str(k.Subset)
	h.U32(uint32(k.SubsetLabels))
	h.Bool(k.MTLSDisabled)
	h.Bool(k.SendUnhealthy)
	h.Bool(k.Failover)
	h.Str(k.Locality)
	clHashConfig(&h, k.LocalityDR)
	k.MeshLocality.hashInto(&h)
	h.Str(k.FailoverLabels)
	h.Str(k.ClusterID)
	return h.Sum()
}

// ClusterLoadAssignment builds the EDS resource k describes (istiod's
// EndpointBuilder.BuildClusterLoadAssignment). It is a pure function of k.
func ClusterLoadAssignment(n index.Names, k *EndpointsKey) (string, proto.Message) {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: k.ClusterName}
	svc := k.Service
	if svc == nil || k.Shard == nil || svc.PortByNumber(k.Port.Number) == nil ||
		svc.Resolution == index.ResolutionDNS || svc.Resolution == index.ResolutionDNSRoundRobin {
		// DNS clusters carry their endpoints inline; istiod answers EDS for
		// them (a resolution change in flight) with an empty assignment.
		return k.ClusterName, cla
	}
	var cands []epCandidate
	cla.Endpoints, cands = epBuildLocalitiesCands(&epInput{
		names: n, svc: svc, shard: k.Shard, port: k.Port,
		subsetLabels: k.SubsetLabels, mtlsDisabled: k.MTLSDisabled, sendUnhealthy: k.SendUnhealthy,
		clusterID: k.ClusterID,
	})
	if len(cla.Endpoints) == 0 {
		return k.ClusterName, cla
	}
	if f := epNewFailover(k); f != nil {
		cla.Endpoints = epSplitFailoverPriority(n, f, cla.Endpoints, cands)
	}
	if setting, ok := epEffectiveLocalityLB(k.loadBalancer(), k.MeshLocality); ok {
		for i, d := range epApplyLocalityLB(cla.Endpoints, k.Locality, setting, k.Failover) {
			if d {
				cla.Endpoints[i].LbEndpoints = nil
			}
		}
	}
	return k.ClusterName, cla
}

// epInput is what endpoint conversion reads, shared by EDS and the
// inline load assignments of DNS clusters.
type epInput struct {
	names         index.Names
	svc           *index.Service
	shard         *index.EndpointShard
	port          index.Port
	subsetLabels  index.LabelSetID
	mtlsDisabled  bool
	sendUnhealthy bool
	clusterID     string
	// hostnames keeps endpoints addressed by hostname (DNS clusters).
	hostnames bool
}

type epCandidate struct {
	ep       *index.Endpoint
	locality string
	port     uint32
	// seq orders candidates that compare equal otherwise; for inline
	// ServiceEntry endpoints it is also the endpoint's index (NAME-INDEX).
	seq int32
	// prio is the failoverPriority priority (before ranking) of the
	// direct encoding; 0 when none applies.
	prio   int32
	inline bool
}

// epCompare orders endpoints by locality, address (IPs before hostnames),
// port, then source order: a total order, so the output is deterministic.
func epCompare(names index.Names) func(a, b epCandidate) int {
	return func(a, b epCandidate) int {
		if c := cmp.Compare(a.locality, b.locality); c != 0 {
			return c
		}
		av, bv := a.ep.Addr.IsValid(), b.ep.Addr.IsValid()
		switch {
		case av && bv:
			if c := a.ep.Addr.Compare(b.ep.Addr); c != 0 {
				return c
			}
		case av != bv:
			if av {
				return -1
			}
			return 1
		default:
			if c := cmp.Compare(names.String(a.ep.Hostname), names.String(b.ep.Hostname)); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(a.port, b.port); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	}
}

// epMetaKey identifies an endpoint's metadata: endpoints of one workload
// share one (immutable) Metadata message.
type epMetaKey struct {
	tls      bool
	workload string
	labels   index.LabelSetID
}

// clWeightOne is the common endpoint weight, shared (immutable).
var clWeightOne = clU32(1)

// epCollect returns the endpoints of the shard that serve in.port (and the
// subset), sorted by locality, address, port and source order, each with
// its endpoint port.
func epCollect(in *epInput) []epCandidate { return epCollectInto(in, nil) }

// epCollectInto is epCollect appending to cands (pooled working memory).
func epCollectInto(in *epInput, cands []epCandidate) []epCandidate {
	seOffset := 0
	svcName := epServiceEntryName(in)
	var seq int32
	for gi := range in.shard.Groups {
		g := &in.shard.Groups[gi]
		port, ok := epEndpointPort(in.svc, g, in.port)
		// Inline ServiceEntry endpoints are named NAME-INDEX as istiod does.
		inline := svcName != "" && epIsInlineGroup(in.names.String(g.Source), svcName)
		base := seOffset
		if inline {
			seOffset += len(g.Endpoints)
		}
		if !ok {
			seq += int32(len(g.Endpoints))
			continue
		}
		for i := range g.Endpoints {
			e := &g.Endpoints[i]
			s := seq
			seq++
			if inline {
				s = int32(base + i)
			}
			if e.Health == index.HealthDraining || (e.Health == index.HealthUnhealthy && !in.sendUnhealthy) {
				continue
			}
			if in.subsetLabels != 0 && !in.names.Matches(in.subsetLabels, e.Labels) {
				continue
			}
			if !e.Addr.IsValid() && (e.Hostname == 0 || !in.hostnames) {
				continue
			}
			cands = append(cands, epCandidate{ep: e, port: port, locality: in.names.String(e.Locality), seq: s, inline: inline})
		}
	}
	slices.SortFunc(cands, epCompare(in.names))
	return cands
}

// epServiceEntryName is the ServiceEntry name inline endpoints are named
// after (NAME-INDEX), or "".
func epServiceEntryName(in *epInput) string {
	if in.svc.Origin == index.OriginServiceEntry && in.svc.Name != 0 {
		return in.names.String(in.svc.Name)
	}
	return ""
}

// epBuildLocalities converts the shard's endpoints of one port (and
// subset) into locality groups: localities sorted by name, endpoints by
// address, weights summed per locality.
func epBuildLocalities(in *epInput) []*endpointv3.LocalityLbEndpoints {
	out, _ := epBuildLocalitiesCands(in)
	return out
}

// epBuildLocalitiesCands is epBuildLocalities that also returns the
// candidates behind the LbEndpoints, in their order.
func epBuildLocalitiesCands(in *epInput) ([]*endpointv3.LocalityLbEndpoints, []epCandidate) {
	cands := epCollect(in)
	if len(cands) == 0 {
		return nil, nil
	}
	svcName := epServiceEntryName(in)
	ns := in.names.String(in.svc.Key.Namespace)
	metas := map[epMetaKey]*corev3.Metadata{}
	addrs := epAddresses(in.names, cands)
	// The messages of all endpoints are allocated in bulk: seven per
	// assignment instead of seven per endpoint.
	n := len(cands)
	lbes := make([]endpointv3.LbEndpoint, n)
	hids := make([]endpointv3.LbEndpoint_Endpoint, n)
	eps := make([]endpointv3.Endpoint, n)
	as := make([]corev3.Address, n)
	sas := make([]corev3.Address_SocketAddress, n)
	sockets := make([]corev3.SocketAddress, n)
	ports := make([]corev3.SocketAddress_PortValue, n)
	var out []*endpointv3.LocalityLbEndpoints
	var cur *endpointv3.LocalityLbEndpoints
	curLoc := ""
	for i := range cands {
		c := &cands[i]
		if cur == nil || c.locality != curLoc {
			cur = &endpointv3.LocalityLbEndpoints{Locality: epParseLocality(c.locality), LoadBalancingWeight: clU32(0)}
			curLoc = c.locality
			out = append(out, cur)
		}
		w := uint32(c.ep.Weight)
		weight := clWeightOne
		if w == 0 {
			w = 1
		} else if w != 1 {
			weight = clU32(w)
		}
		wl := ""
		switch {
		case c.ep.Workload != 0:
			wl = epWorkloadName(in.names, c.ep.Labels, in.names.String(c.ep.Workload))
		case c.inline:
			wl = svcName + "-" + strconv.Itoa(int(c.seq))
		}
		mk := epMetaKey{tls: c.ep.TLSMode == index.TLSModeIstio && !in.mtlsDisabled, workload: wl, labels: c.ep.Labels}
		md, ok := metas[mk]
		if !ok {
			md = epMetadata(in, mk, ns)
			metas[mk] = md
		}
		ports[i].PortValue = c.port
		sockets[i].Address = addrs[i]
		sockets[i].PortSpecifier = &ports[i]
		sas[i].SocketAddress = &sockets[i]
		as[i].Address = &sas[i]
		eps[i].Address = &as[i]
		hids[i].Endpoint = &eps[i]
		lbe := &lbes[i]
		lbe.HostIdentifier = &hids[i]
		lbe.HealthStatus = epHealth(in.svc, c.ep)
		lbe.Metadata = md
		lbe.LoadBalancingWeight = weight
		cur.LbEndpoints = append(cur.LbEndpoints, lbe)
		if sum := cur.LoadBalancingWeight.Value + w; sum >= cur.LoadBalancingWeight.Value {
			cur.LoadBalancingWeight.Value = sum
		} else {
			cur.LoadBalancingWeight.Value = 1<<32 - 1 // istiod saturates on overflow
		}
	}
	return out, cands
}

// epAddresses renders the candidates' addresses into one buffer and returns
// them as strings sharing it (the buffer is never written again).
func epAddresses(names index.Names, cands []epCandidate) []string {
	buf := make([]byte, 0, 16*len(cands))
	ends := make([]int, len(cands))
	for i := range cands {
		if e := cands[i].ep; e.Addr.IsValid() {
			buf = e.Addr.AppendTo(buf)
		} else {
			buf = append(buf, names.String(e.Hostname)...)
		}
		ends[i] = len(buf)
	}
	out := make([]string, len(cands))
	start := 0
	for i, end := range ends {
		if end > start {
			out[i] = unsafe.String(&buf[start], end-start)
		}
		start = end
	}
	return out
}

// epEndpointPort maps the service port to the port of a group's endpoints:
// by port name (Kubernetes EndpointSlices, WorkloadEntry ports), else for
// ServiceEntries and for the WorkloadEntries a Kubernetes Service selects
// (a group without ports) the targetPort or the port number. ok is false when the group does not
// serve the port.
func epEndpointPort(svc *index.Service, g *index.EndpointGroup, p index.Port) (uint32, bool) {
	for _, gp := range g.Ports {
		if gp.Name == p.Name {
			return gp.Port, true
		}
	}
	if svc.Origin == index.OriginKubernetes && (g.Pods || len(g.Ports) > 0) {
		return 0, false
	}
	if p.TargetPort != 0 {
		return p.TargetPort, true
	}
	return p.Number, true
}

func epIsInlineGroup(source, seName string) bool {
	if source == seName {
		return true
	}
	return len(source) > len(seName) && source[:len(seName)] == seName && source[len(seName)] == '#'
}

// epHealth: Kubernetes endpoints report HEALTHY; ServiceEntry
// endpoints carry no health (UNKNOWN), as in istiod's output.
func epHealth(svc *index.Service, e *index.Endpoint) corev3.HealthStatus {
	switch e.Health {
	case index.HealthUnhealthy:
		return corev3.HealthStatus_UNHEALTHY
	case index.HealthDraining:
		return corev3.HealthStatus_DRAINING
	}
	if svc.Origin == index.OriginKubernetes {
		return corev3.HealthStatus_HEALTHY
	}
	return corev3.HealthStatus_UNKNOWN
}

// epTLSMatch is the tlsMode transport socket match metadata, shared.
var epTLSMatch = &structpb.Struct{Fields: map[string]*structpb.Value{"tlsMode": clStructString("istio")}}

// epMetadata is istiod's AppendLbEndpointMetadata: the tlsMode transport
// socket match, and the compressed telemetry label
// "workload;namespace;canonical-name;canonical-revision;cluster".
func epMetadata(in *epInput, k epMetaKey, ns string) *corev3.Metadata {
	md := &corev3.Metadata{FilterMetadata: make(map[string]*structpb.Struct, 2)}
	if k.tls {
		md.FilterMetadata["envoy.transport_socket_match"] = epTLSMatch
	}
	name, rev := epCanonicalService(in.names, k.labels, k.workload)
	if rev == "latest" {
		rev = ""
	}
	md.FilterMetadata["istio"] = &structpb.Struct{Fields: map[string]*structpb.Value{
		"workload": clStructString(k.workload + ";" + ns + ";" + name + ";" + rev + ";" + in.clusterID),
	}}
	return md
}

// ApplyDestinationRule sets the fields of k that a DestinationRule decides
// for k.Port and k.Subset (istiod's EndpointBuilder): MTLSDisabled,
// SendUnhealthy, Failover and LocalityDR, and Locality (from
// proxyLocality) only when failover or a locality distribution applies.
// peerMTLSDisabled is PeerAuthentication's verdict for the service; a TLS
// mode in the rule overrides it. dr may be nil. It allocates nothing.
func (k *EndpointsKey) ApplyDestinationRule(dr *index.Config, proxyLocality string, peerMTLSDisabled bool) {
	spec := clDestinationRule(dr)
	var subset *networking.Subset
	if k.Subset != "" {
		subset = clFindSubset(spec, k.Subset)
	}
	p := clResolvePolicy(spec, k.Port.Number, subset, nil) // istiod's EDS reads the rule alone
	if mode, ok := epTLSMode(spec, k.Port.Number, subset); ok {
		k.MTLSDisabled = mode != networking.ClientTLSSettings_ISTIO_MUTUAL
	} else {
		k.MTLSDisabled = peerMTLSDisabled
	}
	k.SendUnhealthy = p.outlierDetection.GetMinHealthPercent() <= 0
	k.Failover = p.outlierDetection != nil
	k.LocalityDR = nil
	k.FailoverLabels = ""
	if p.loadBalancer.GetLocalityLbSetting() != nil {
		k.LocalityDR = dr
		k.MeshLocality = nil
	}
	k.Locality = ""
	if setting, ok := epEffectiveLocalityLB(p.loadBalancer, k.MeshLocality); ok && (k.Failover || setting.GetDistribute() != nil) {
		k.Locality = proxyLocality
	}
}

// epTLSMode is istiod's tlsModeForDestinationRule: the subset's TLS mode
// (its port-level setting first), else the rule's (port-level first).
func epTLSMode(dr *networking.DestinationRule, port uint32, subset *networking.Subset) (networking.ClientTLSSettings_TLSmode, bool) {
	if dr == nil {
		return 0, false
	}
	if subset != nil {
		if m, ok := epPolicyTLSMode(subset.GetTrafficPolicy(), port); ok {
			return m, true
		}
	}
	return epPolicyTLSMode(dr.GetTrafficPolicy(), port)
}

func epPolicyTLSMode(tp *networking.TrafficPolicy, port uint32) (networking.ClientTLSSettings_TLSmode, bool) {
	if tp == nil {
		return 0, false
	}
	for _, ps := range tp.GetPortLevelSettings() {
		if ps.GetPort().GetNumber() == port && ps.Tls != nil {
			return ps.Tls.Mode, true
		}
	}
	if tp.Tls != nil {
		return tp.Tls.Mode, true
	}
	return 0, false
}
