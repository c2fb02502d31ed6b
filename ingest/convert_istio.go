package ingest

import (
	"net/netip"

	"github.com/pilotfish-mesh/pilotfish/index"
	extensions "istio.io/api/extensions/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"
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
	if t := o.Meta.CreationTimestamp; !t.IsZero() {
		row.CreationTime = t.UnixNano()
	}
	if o.Pos.File != "" {
		row.SourceFile, row.SourceLine = c.sym(o.Pos.File), int32(o.Pos.Line)
	}
	var selector map[string]string
	hasSelector := false
	switch s := o.Spec.(type) {
	case *networking.VirtualService:
		hosts = c.virtualService(&row, s) // convert_vs.go
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
	case *networking.EnvoyFilter:
		selector, hasSelector = envoyFilterRow(&row, ns, o.Meta.Name, s) // convert_envoyfilter.go
	case *extensions.WasmPlugin:
		selector, hasSelector = wasmPluginRow(&row, s) // convert_wasmplugin.go
	case *telemetry.Telemetry:
		if sel := s.GetSelector(); sel != nil {
			selector, hasSelector = sel.GetMatchLabels(), true
		}
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
