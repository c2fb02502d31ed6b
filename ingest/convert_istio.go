package ingest

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
)

// config puts the config row every Istio object gets (it backs configz and
// the generators), with the hosts and selector its indexes need. dst, when
// not nil, is where the row's Hosts are built if they fit (memory of the
// object's own, allocated with its other rows' slices).
func (c *Converter) config(b *index.Batch, o *Object, kind index.ConfigKind, dst []index.Sym) rowRef {
	ns := o.Meta.Namespace
	var hosts []string
	row := index.Config{
		Kind:       kind,
		Key:        index.ConfigKey{Namespace: c.sym(ns), Name: c.sym(o.Meta.Name)},
		Spec:       o.Spec,
		Labels:     c.labelSet(o.Meta.Labels),
		Generation: o.Meta.Generation,
	}
	row.Hash, c.hashBuf = configHash(o, c.hashBuf)
	if o.Pos.File != "" {
		row.SourceFile, row.SourceLine = c.sym(o.Pos.File), int32(o.Pos.Line)
	}
	var selector map[string]string
	hasSelector := false
	switch s := o.Spec.(type) {
	case *networking.VirtualService:
		hosts = s.Hosts
		row.ExportTo = c.exportTo(s.ExportTo)
	case *networking.DestinationRule:
		hosts = []string{s.Host}
		row.ExportTo = c.exportTo(s.ExportTo)
		row.SubsetLabels = c.subsetLabels(s) // convert_subsets.go
		if s.WorkloadSelector != nil {
			selector, hasSelector = s.WorkloadSelector.MatchLabels, true
		}
	case *networking.Gateway:
		for _, srv := range s.Servers {
			hosts = append(hosts, srv.Hosts...)
		}
		selector, hasSelector = s.Selector, s.Selector != nil
	case *networking.Sidecar:
		if s.WorkloadSelector != nil {
			selector, hasSelector = s.WorkloadSelector.Labels, true
		}
	case *networking.ServiceEntry:
		hosts = s.Hosts
		row.ExportTo = c.exportTo(s.ExportTo)
	case *security.AuthorizationPolicy, *security.PeerAuthentication, *security.RequestAuthentication:
		selector, hasSelector = securityRow(&row, o) // convert_security.go
	}
	if len(hosts) > 0 {
		if cap(dst) < len(hosts) {
			dst = make([]index.Sym, 0, len(hosts))
		}
		row.Hosts = dst[:0]
	}
	for _, h := range hosts {
		if kind == index.ConfigVirtualService || kind == index.ConfigDestinationRule {
			h = c.fqdn(h, ns)
		}
		row.Hosts = append(row.Hosts, c.sym(h))
	}
	if hasSelector {
		row.HasSelector = true
		row.Selector = c.labelSet(selector)
	}
	b.PutConfig(row)
	return configRef(kind, row.Key)
}

// serviceEntry puts the config row, one service per host (as istiod does),
// and the inline endpoints of each host's service.
func (c *Converter) serviceEntry(b *index.Batch, o *Object) []rowRef {
	se := o.Spec.(*networking.ServiceEntry)
	var one *seOne
	var hostBuf []index.Sym
	if len(se.Hosts) == 1 && len(se.Addresses) <= 1 && len(se.Ports) == 1 && len(se.Endpoints) <= 1 {
		one = new(seOne)
		hostBuf = one.host[:0]
		c.refHome = one.refs[:0]
	}
	refs := append(c.scratchRefs(), c.config(b, o, index.ConfigServiceEntry, hostBuf))
	ns := c.sym(o.Meta.Namespace)
	base := index.Service{
		Name:         c.sym(o.Meta.Name),
		Origin:       index.OriginServiceEntry,
		MeshExternal: se.Location == networking.ServiceEntry_MESH_EXTERNAL,
		ExportTo:     c.exportTo(se.ExportTo),
		Labels:       c.labelSet(o.Meta.Labels),
	}
	switch se.Resolution {
	case networking.ServiceEntry_NONE:
		base.Resolution = index.ResolutionPassthrough
	case networking.ServiceEntry_STATIC:
		base.Resolution = index.ResolutionClientSideLB
	case networking.ServiceEntry_DNS:
		base.Resolution = index.ResolutionDNS
	case networking.ServiceEntry_DNS_ROUND_ROBIN:
		base.Resolution = index.ResolutionDNSRoundRobin
	}
	switch {
	case len(se.Addresses) == 0:
	case one != nil:
		base.Addresses = one.addr[:0]
	default:
		base.Addresses = make([]netip.Prefix, 0, len(se.Addresses))
	}
	for _, a := range se.Addresses {
		if p, ok := parsePrefix(a); ok {
			base.Addresses = append(base.Addresses, p)
		}
	}
	if one != nil {
		base.Ports = one.port[:0]
	} else {
		base.Ports = make([]index.Port, 0, len(se.Ports))
	}
	for _, p := range se.Ports {
		port := index.Port{Name: c.sym(p.Name), Number: p.Number, TargetPort: p.TargetPort, Protocol: protocolOf(p.Protocol)}
		base.Ports = append(base.Ports, port)
	}
	if se.WorkloadSelector != nil {
		base.HasSelector = true
		base.Selector = c.labelSet(se.WorkloadSelector.Labels)
	}
	groups := c.entryGroups(o.Meta.Name, se.Endpoints, one)
	for _, h := range se.Hosts {
		svc := base
		svc.Key = index.ServiceKey{Host: c.sym(h), Namespace: ns}
		b.PutService(svc)
		refs = append(refs, serviceRef(svc.Key))
		for _, g := range groups {
			b.PutEndpoints(svc.Key, g)
			refs = append(refs, endpointsRef(svc.Key, g.Source))
		}
	}
	return refs
}

// seOne holds, in one allocation, the slices of a ServiceEntry with one host
// and port and at most one address and endpoint (istio-bench's, and most):
// they are replaced together when the entry changes.
type seOne struct {
	host [1]index.Sym
	addr [1]netip.Prefix
	port [1]index.Port
	ep   [1]index.Endpoint
	refs [3]rowRef // the converter's list: config, service, endpoints
}

// entryGroups converts inline ServiceEntry endpoints into endpoint groups,
// one per distinct port map (the group's ports apply to all its endpoints).
// The list is the converter's scratch (the batch copies groups); with one,
// a single endpoint goes into one.ep.
func (c *Converter) entryGroups(name string, eps []*networking.WorkloadEntry, one *seOne) []index.EndpointGroup {
	groups := c.groups[:0]
	for _, we := range eps {
		ports := c.entryPorts(we.Ports)
		gi := -1
		for i := range groups {
			if samePorts(groups[i].Ports, ports) {
				gi = i
				break
			}
		}
		if gi < 0 {
			src := name
			if len(groups) > 0 {
				src = name + "#" + strconv.Itoa(len(groups))
			}
			groups = append(groups, index.EndpointGroup{Source: c.sym(src), Ports: ports})
			gi = len(groups) - 1
		}
		switch {
		case groups[gi].Endpoints != nil:
		case one != nil && len(eps) == 1:
			groups[gi].Endpoints = one.ep[:0]
		default:
			groups[gi].Endpoints = make([]index.Endpoint, 0, len(eps)) // usually one group: exact
		}
		groups[gi].Endpoints = append(groups[gi].Endpoints, c.entryEndpoint(we))
	}
	c.groups = groups[:0]
	return groups
}

func (c *Converter) entryEndpoint(we *networking.WorkloadEntry) index.Endpoint {
	e := index.Endpoint{
		Labels:         c.labelSet(we.Labels),
		ServiceAccount: c.sym(we.ServiceAccount),
		Locality:       c.sym(we.Locality),
		Network:        c.sym(we.Network),
	}
	if a, err := netip.ParseAddr(we.Address); err == nil {
		e.Addr = a
	} else {
		e.Hostname = c.sym(we.Address)
	}
	if we.Weight > 0 && we.Weight <= 0xffff {
		e.Weight = uint16(we.Weight)
	}
	e.TLSMode = entryTLSMode(we)
	return e
}

func (c *Converter) entryPorts(m map[string]uint32) []index.EndpointPort {
	if len(m) == 0 {
		return nil
	}
	out := make([]index.EndpointPort, 0, len(m))
	for name, port := range m {
		out = append(out, index.EndpointPort{Name: c.sym(name), Port: port})
	}
	// Map order is random: sort by name for a deterministic row (and hash).
	slices.SortFunc(out, func(a, b index.EndpointPort) int {
		return strings.Compare(c.syms.String(a.Name), c.syms.String(b.Name))
	})
	return out
}

func samePorts(a, b []index.EndpointPort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// workloadEntry puts the config row and a workload row.
func (c *Converter) workloadEntry(b *index.Batch, o *Object) []rowRef {
	we := o.Spec.(*networking.WorkloadEntry)
	refs := []rowRef{c.config(b, o, index.ConfigWorkloadEntry, nil)}
	key := index.WorkloadKey{Kind: index.WorkloadEntry, Namespace: c.sym(o.Meta.Namespace), Name: c.sym(o.Meta.Name)}
	w := index.Workload{
		Key:            key,
		Labels:         c.labelSet(we.Labels),
		ServiceAccount: c.sym(we.ServiceAccount),
		Locality:       c.sym(we.Locality),
		Network:        c.sym(we.Network),
		Ports:          c.entryPorts(we.Ports),
		Ready:          true,
	}
	if a, err := netip.ParseAddr(we.Address); err == nil {
		w.Addr = a
	}
	w.TLSMode = entryTLSMode(we)
	b.PutWorkload(w)
	return append(refs, workloadRef(key))
}

// entryTLSMode is istiod's rule for workload entries: the tlsMode label if
// set, else istio when the entry has a service account (it runs a sidecar
// with an identity), else disabled.
func entryTLSMode(we *networking.WorkloadEntry) index.TLSMode {
	if v, ok := we.Labels[labelTLSMode]; ok {
		if v == "istio" {
			return index.TLSModeIstio
		}
		return index.TLSModeDisabled
	}
	if we.ServiceAccount != "" {
		return index.TLSModeIstio
	}
	return index.TLSModeDisabled
}
