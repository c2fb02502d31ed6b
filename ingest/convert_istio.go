package ingest

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
)

// config puts the config row every Istio object gets (it backs configz and
// the generators), with the hosts and selector its indexes need.
func (c *Converter) config(b *index.Batch, o *Object, kind index.ConfigKind, hosts []string) rowRef {
	ns := o.Meta.Namespace
	row := index.Config{
		Kind:       kind,
		Key:        index.ConfigKey{Namespace: c.sym(ns), Name: c.sym(o.Meta.Name)},
		Spec:       o.Spec,
		Labels:     c.labelSet(o.Meta.Labels),
		Generation: o.Meta.Generation,
		Hash:       o.Hash,
	}
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
	case *security.AuthorizationPolicy:
		selector, hasSelector = workloadSelector(s.Selector)
		row.DryRun, _ = strconv.ParseBool(o.Meta.Annotations["istio.io/dry-run"]) // validation reports a bad value
	case *security.PeerAuthentication:
		selector, hasSelector = workloadSelector(s.Selector)
	case *security.RequestAuthentication:
		selector, hasSelector = workloadSelector(s.Selector)
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

func workloadSelector(s *typev1beta1.WorkloadSelector) (map[string]string, bool) {
	if s == nil {
		return nil, false
	}
	return s.MatchLabels, true
}

// serviceEntry puts the config row, one service per host (as istiod does),
// and the inline endpoints of each host's service.
func (c *Converter) serviceEntry(b *index.Batch, o *Object) []rowRef {
	se := o.Spec.(*networking.ServiceEntry)
	refs := make([]rowRef, 0, 1+2*len(se.Hosts))
	refs = append(refs, c.config(b, o, index.ConfigServiceEntry, nil))
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
	if len(se.Addresses) > 0 {
		base.Addresses = make([]netip.Prefix, 0, len(se.Addresses))
	}
	for _, a := range se.Addresses {
		if p, ok := parsePrefix(a); ok {
			base.Addresses = append(base.Addresses, p)
		}
	}
	base.Ports = make([]index.Port, 0, len(se.Ports))
	for _, p := range se.Ports {
		port := index.Port{Name: c.sym(p.Name), Number: p.Number, TargetPort: p.TargetPort, Protocol: protocolOf(p.Protocol)}
		base.Ports = append(base.Ports, port)
	}
	if se.WorkloadSelector != nil {
		base.HasSelector = true
		base.Selector = c.labelSet(se.WorkloadSelector.Labels)
	}
	groups := c.entryGroups(o.Meta.Name, se.Endpoints)
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

// entryGroups converts inline ServiceEntry endpoints into endpoint groups,
// one per distinct port map (the group's ports apply to all its endpoints).
func (c *Converter) entryGroups(name string, eps []*networking.WorkloadEntry) []index.EndpointGroup {
	var groups []index.EndpointGroup
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
		if groups[gi].Endpoints == nil {
			groups[gi].Endpoints = make([]index.Endpoint, 0, len(eps)) // usually one group: exact
		}
		groups[gi].Endpoints = append(groups[gi].Endpoints, c.entryEndpoint(we))
	}
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
