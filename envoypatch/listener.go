package envoypatch

import (
	"slices"
	"strings"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

// Names istiod's listener matches treat specially.
const (
	virtualInbound  = "virtualInbound"
	virtualOutbound = "virtualOutbound"
	hcmName         = "envoy.filters.network.http_connection_manager"
)

// PatchListener applies the set's listener-family patches to a generated
// listener of this context, as istiod's patchListener does (listener
// level, then listener filters, then each filter chain: chain level, then
// network filters, then the HTTP filters inside each HTTP connection
// manager). nil: a LISTENER REMOVE removed it. A filter chain left without
// filters (removed) is dropped; ADDed listeners are AddedListeners'.
func (s *Set) PatchListener(c Context, l *listener.Listener) (*listener.Listener, []Failure) {
	if s == nil || l == nil {
		return l, nil
	}
	var fails []Failure
	for _, p := range s.by[networking.EnvoyFilter_LISTENER] {
		if !p.inContext(c) || !listenerMatch(l, p) {
			continue
		}
		if p.Operation == networking.EnvoyFilter_Patch_REMOVE {
			return nil, nil
		}
		if isMerge(p.Operation) {
			mergeValue(p.Operation, l, p.Value)
		}
	}
	fails = patchListenerFilters(c, s.by[networking.EnvoyFilter_LISTENER_FILTER], l, fails)
	fails = s.patchFilterChains(c, l, fails)
	return l, fails
}

// AddedListeners are fresh copies of the set's LISTENER ADD values for
// this context, in order: a patch without a context adds only to
// sidecars' outbound and gateways' listeners. (istiod adds none next to
// the virtual listeners, which it patches alone.)
func (s *Set) AddedListeners(c Context) []*listener.Listener {
	if s == nil {
		return nil
	}
	var out []*listener.Listener
	for _, p := range s.by[networking.EnvoyFilter_LISTENER] {
		if p.Operation == networking.EnvoyFilter_Patch_ADD && addsIn(p, c) {
			out = append(out, proto.Clone(p.Value).(*listener.Listener))
		}
	}
	return out
}

func patchListenerFilters(c Context, patches []*Patch, l *listener.Listener, fails []Failure) []Failure {
	for _, p := range patches {
		if !p.inContext(c) || !listenerMatch(l, p) {
			continue
		}
		name := p.Match.GetListener().GetListenerFilter()
		clone := func() *listener.ListenerFilter { return proto.Clone(p.Value).(*listener.ListenerFilter) }
		match := func(f *listener.ListenerFilter) bool { return f.GetName() == name }
		switch p.Operation {
		case networking.EnvoyFilter_Patch_ADD:
			l.ListenerFilters = append(l.ListenerFilters, clone())
		case networking.EnvoyFilter_Patch_INSERT_FIRST:
			l.ListenerFilters = slices.Insert(l.ListenerFilters, 0, clone())
		case networking.EnvoyFilter_Patch_INSERT_AFTER:
			if name == "" {
				l.ListenerFilters = append(l.ListenerFilters, clone())
			} else if i := slices.IndexFunc(l.ListenerFilters, match); i >= 0 {
				l.ListenerFilters = slices.Insert(l.ListenerFilters, i+1, clone())
			}
		case networking.EnvoyFilter_Patch_INSERT_BEFORE:
			if name == "" {
				l.ListenerFilters = slices.Insert(l.ListenerFilters, 0, clone())
			} else if i := slices.IndexFunc(l.ListenerFilters, match); i >= 0 {
				l.ListenerFilters = slices.Insert(l.ListenerFilters, i, clone())
			}
		case networking.EnvoyFilter_Patch_REPLACE:
			if i := slices.IndexFunc(l.ListenerFilters, match); name != "" && i >= 0 {
				l.ListenerFilters[i] = clone()
			}
		case networking.EnvoyFilter_Patch_REMOVE:
			if name != "" {
				l.ListenerFilters = slices.DeleteFunc(l.ListenerFilters, match)
			}
		case networking.EnvoyFilter_Patch_MERGE:
			if name != "" {
				fails = mergeListenerFilters(p, l, fails)
			}
		}
	}
	return fails
}

// mergeListenerFilters merges the value's typed config into the listener
// filters the match names (their names stay, as in istiod). istiod merges
// it into every listener filter with a typed config and fails the whole
// listener's patching on one of another type (a panic it recovers from);
// pilotfish merges into the named filters only and reports a filter of
// another type as a Failure.
func mergeListenerFilters(p *Patch, l *listener.Listener, fails []Failure) []Failure {
	src := p.Value.(*listener.ListenerFilter).GetTypedConfig()
	if src == nil {
		return fails
	}
	name := p.Match.GetListener().GetListenerFilter()
	for _, f := range l.ListenerFilters {
		dst := f.GetTypedConfig()
		if dst == nil || f.GetName() != name {
			continue
		}
		merged, err := mergeAny(dst, src)
		if err != nil {
			fails = append(fails, Failure{Patch: p, Err: err})
			continue
		}
		f.ConfigType = &listener.ListenerFilter_TypedConfig{TypedConfig: merged}
	}
	return fails
}

func (s *Set) patchFilterChains(c Context, l *listener.Listener, fails []Failure) []Failure {
	for _, fc := range l.FilterChains {
		if fc.Filters != nil {
			fails = s.patchFilterChain(c, l, fc, fails)
		}
	}
	if fc := l.GetDefaultFilterChain(); fc.GetFilters() != nil {
		fails = s.patchFilterChain(c, l, fc, fails)
		if fc.Filters == nil {
			l.DefaultFilterChain = nil
		}
	}
	for _, p := range s.by[networking.EnvoyFilter_FILTER_CHAIN] {
		if p.Operation == networking.EnvoyFilter_Patch_ADD && p.inContext(c) && listenerMatch(l, p) {
			l.FilterChains = append(l.FilterChains, proto.Clone(p.Value).(*listener.FilterChain))
		}
	}
	l.FilterChains = slices.DeleteFunc(l.FilterChains, func(fc *listener.FilterChain) bool { return fc.Filters == nil })
	return fails
}

func (s *Set) patchFilterChain(c Context, l *listener.Listener, fc *listener.FilterChain, fails []Failure) []Failure {
	for _, p := range s.by[networking.EnvoyFilter_FILTER_CHAIN] {
		if !p.inContext(c) || !listenerMatch(l, p) || !filterChainMatch(l, fc, p) {
			continue
		}
		if p.Operation == networking.EnvoyFilter_Patch_REMOVE {
			fc.Filters = nil // dropped by the caller
			return fails
		}
		if !isMerge(p.Operation) {
			continue
		}
		v := p.Value.(*listener.FilterChain)
		ts, dst := v.GetTransportSocket(), fc.GetTransportSocket()
		if ts != nil && dst != nil && ts.GetName() == dst.GetName() {
			// The same socket: its typed configs merge, the value's other
			// fields do not (istiod's mergeTransportSocketListener).
			if err := mergeSocketConfig(dst, ts); err != nil {
				fails = append(fails, Failure{Patch: p, Err: err})
			}
			continue
		}
		mergeValue(p.Operation, fc, v)
	}
	return s.patchNetworkFilters(c, l, fc, fails)
}

func (s *Set) patchNetworkFilters(c Context, l *listener.Listener, fc *listener.FilterChain, fails []Failure) []Failure {
	for _, p := range s.by[networking.EnvoyFilter_NETWORK_FILTER] {
		if !p.inContext(c) || !listenerMatch(l, p) || !filterChainMatch(l, fc, p) {
			continue
		}
		fm := p.Match.GetListener().GetFilterChain().GetFilter()
		clone := func() *listener.Filter { return proto.Clone(p.Value).(*listener.Filter) }
		match := func(f *listener.Filter) bool { return f.GetName() == fm.GetName() }
		switch p.Operation {
		case networking.EnvoyFilter_Patch_ADD:
			fc.Filters = append(fc.Filters, clone())
		case networking.EnvoyFilter_Patch_INSERT_FIRST:
			fc.Filters = slices.Insert(fc.Filters, 0, clone())
		case networking.EnvoyFilter_Patch_INSERT_AFTER:
			if fm == nil {
				fc.Filters = append(fc.Filters, clone())
			} else if i := slices.IndexFunc(fc.Filters, match); i >= 0 {
				fc.Filters = slices.Insert(fc.Filters, i+1, clone())
			}
		case networking.EnvoyFilter_Patch_INSERT_BEFORE:
			if fm == nil {
				fc.Filters = slices.Insert(fc.Filters, 0, clone())
			} else if i := slices.IndexFunc(fc.Filters, match); i >= 0 {
				fc.Filters = slices.Insert(fc.Filters, i, clone())
			}
		case networking.EnvoyFilter_Patch_REPLACE:
			if i := slices.IndexFunc(fc.Filters, match); fm != nil && i >= 0 {
				fc.Filters[i] = clone()
			}
		case networking.EnvoyFilter_Patch_REMOVE:
			if fm != nil {
				fc.Filters = slices.DeleteFunc(fc.Filters, match)
			}
		}
	}
	for _, f := range fc.Filters {
		fails = s.patchNetworkFilter(c, l, fc, f, fails)
	}
	return fails
}

// patchNetworkFilter applies the MERGE patches that match one network
// filter (its name replaced by a value's name, typed configs merged), then,
// for an HTTP connection manager, the HTTP filter patches.
func (s *Set) patchNetworkFilter(c Context, l *listener.Listener, fc *listener.FilterChain, f *listener.Filter, fails []Failure) []Failure {
	for _, p := range s.by[networking.EnvoyFilter_NETWORK_FILTER] {
		if p.Operation != networking.EnvoyFilter_Patch_MERGE || f.GetTypedConfig() == nil ||
			!p.inContext(c) || !listenerMatch(l, p) || !filterChainMatch(l, fc, p) || !networkFilterMatch(f, p) {
			continue
		}
		v := p.Value.(*listener.Filter)
		if src := v.GetTypedConfig(); src != nil {
			merged, err := mergeAny(f.GetTypedConfig(), src)
			if err != nil {
				fails = append(fails, Failure{Patch: p, Err: err})
				continue
			}
			f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: merged}
		}
		if v.GetName() != "" {
			f.Name = v.GetName()
		}
	}
	if f.GetName() == hcmName {
		fails = s.patchHTTPFilters(c, l, fc, f, fails)
	}
	return fails
}

// patchHTTPFilters applies the HTTP_FILTER patches inside an HTTP
// connection manager: its typed config is decoded, patched and encoded
// again, only when some patch reaches it.
func (s *Set) patchHTTPFilters(c Context, l *listener.Listener, fc *listener.FilterChain, f *listener.Filter, fails []Failure) []Failure {
	var patches []*Patch
	for _, p := range s.by[networking.EnvoyFilter_HTTP_FILTER] {
		if p.inContext(c) && listenerMatch(l, p) && filterChainMatch(l, fc, p) && networkFilterMatch(f, p) {
			patches = append(patches, p)
		}
	}
	if len(patches) == 0 {
		return fails
	}
	conn := &hcm.HttpConnectionManager{}
	if tc := f.GetTypedConfig(); tc != nil {
		if err := tc.UnmarshalTo(conn); err != nil {
			return fails // istiod leaves a connection manager it cannot decode as it is
		}
	}
	for _, p := range patches {
		sub := p.Match.GetListener().GetFilterChain().GetFilter().GetSubFilter()
		clone := func() *hcm.HttpFilter { return proto.Clone(p.Value).(*hcm.HttpFilter) }
		match := func(h *hcm.HttpFilter) bool { return h.GetName() == sub.GetName() }
		switch p.Operation {
		case networking.EnvoyFilter_Patch_ADD:
			conn.HttpFilters = append(conn.HttpFilters, clone())
		case networking.EnvoyFilter_Patch_INSERT_FIRST:
			conn.HttpFilters = slices.Insert(conn.HttpFilters, 0, clone())
		case networking.EnvoyFilter_Patch_INSERT_AFTER:
			if sub == nil {
				conn.HttpFilters = append(conn.HttpFilters, clone())
			} else if i := slices.IndexFunc(conn.HttpFilters, match); i >= 0 {
				conn.HttpFilters = slices.Insert(conn.HttpFilters, i+1, clone())
			}
		case networking.EnvoyFilter_Patch_INSERT_BEFORE:
			if sub == nil {
				conn.HttpFilters = slices.Insert(conn.HttpFilters, 0, clone())
			} else if i := slices.IndexFunc(conn.HttpFilters, match); i >= 0 {
				conn.HttpFilters = slices.Insert(conn.HttpFilters, i, clone())
			}
		case networking.EnvoyFilter_Patch_REPLACE:
			if i := slices.IndexFunc(conn.HttpFilters, match); sub != nil && i >= 0 {
				conn.HttpFilters[i] = clone()
			}
		case networking.EnvoyFilter_Patch_REMOVE:
			if sub != nil {
				conn.HttpFilters = slices.DeleteFunc(conn.HttpFilters, match)
			}
		}
	}
	for _, h := range conn.HttpFilters {
		fails = mergeHTTPFilter(patches, h, fails)
	}
	if f.GetTypedConfig() == nil {
		return fails // istiod patches a connection manager without config but keeps none
	}
	a, err := toAny(conn)
	if err != nil {
		return fails
	}
	f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: a}
	return fails
}

// mergeHTTPFilter applies the MERGE patches that match one HTTP filter
// with a typed config: configs merged, the name replaced by a value's.
func mergeHTTPFilter(patches []*Patch, h *hcm.HttpFilter, fails []Failure) []Failure {
	for _, p := range patches {
		sub := p.Match.GetListener().GetFilterChain().GetFilter().GetSubFilter()
		if p.Operation != networking.EnvoyFilter_Patch_MERGE || h.GetTypedConfig() == nil ||
			(sub != nil && sub.GetName() != h.GetName()) {
			continue
		}
		v := p.Value.(*hcm.HttpFilter)
		if src := v.GetTypedConfig(); src != nil {
			merged, err := mergeAny(h.GetTypedConfig(), src)
			if err != nil {
				fails = append(fails, Failure{Patch: p, Err: err})
				continue
			}
			h.ConfigType = &hcm.HttpFilter_TypedConfig{TypedConfig: merged}
		}
		if v.GetName() != "" {
			h.Name = v.GetName()
		}
	}
	return fails
}

// listenerMatch is istiod's: the match's listener name, and its port
// (except for the virtual listeners below LISTENER, whose filter chains
// are matched on their destination port instead).
func listenerMatch(l *listener.Listener, p *Patch) bool {
	m := p.Match.GetListener()
	if m == nil {
		return true
	}
	if m.GetName() != "" && m.GetName() != l.GetName() {
		return false
	}
	if p.ApplyTo != networking.EnvoyFilter_LISTENER && isVirtual(l) {
		return true
	}
	if m.GetPortNumber() != 0 {
		sa := l.GetAddress().GetSocketAddress()
		return sa != nil && sa.GetPortValue() == m.GetPortNumber()
	}
	return true
}

func isVirtual(l *listener.Listener) bool {
	return l.GetName() == virtualInbound || l.GetName() == virtualOutbound
}

// filterChainMatch is istiod's, the listener already matched: a virtual
// listener's chain by the match's port as destination port, then the
// chain's name, SNI, transport protocol, application protocols (every one
// of the comma-separated list) and destination port.
func filterChainMatch(l *listener.Listener, fc *listener.FilterChain, p *Patch) bool {
	lm := p.Match.GetListener()
	if lm == nil {
		return true
	}
	fcm := fc.GetFilterChainMatch()
	if isVirtual(l) && lm.GetPortNumber() > 0 && fcm.GetDestinationPort().GetValue() != lm.GetPortNumber() {
		return false
	}
	m := lm.GetFilterChain()
	if m == nil {
		return true
	}
	switch {
	case m.GetName() != "" && m.GetName() != fc.GetName():
		return false
	case m.GetSni() != "" && !slices.Contains(fcm.GetServerNames(), m.GetSni()):
		return false
	case m.GetTransportProtocol() != "" && (fcm == nil || fcm.GetTransportProtocol() != m.GetTransportProtocol()):
		return false
	case m.GetDestinationPort() > 0 && (fcm.GetDestinationPort() == nil || fcm.GetDestinationPort().GetValue() != m.GetDestinationPort()):
		return false
	}
	if ap := m.GetApplicationProtocols(); ap != "" {
		if fcm == nil {
			return false
		}
		for _, a := range strings.Split(ap, ",") {
			if !slices.Contains(fcm.GetApplicationProtocols(), a) {
				return false
			}
		}
	}
	return true
}

// networkFilterMatch: the match's filter name, if it names one.
func networkFilterMatch(f *listener.Filter, p *Patch) bool {
	fm := p.Match.GetListener().GetFilterChain().GetFilter()
	return fm == nil || fm.GetName() == f.GetName()
}
