package rules

import (
	"encoding/binary"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Reusing a merged gateway across config versions: after a config change
// the router does not depend on, a new scope computes an equal merged
// gateway; reusing the previous one (configView.reuseGateway) keeps its
// route keys (with their hashes), so the router's RDS is concatenated from
// cached parts without translating its Gateways and VirtualServices again.

// computeDigest hashes every input of m: the symbol tables, the router's
// namespace, selected Gateways and source labels, the domain suffix
// (delegates' short names), every server (its Gateway row, position,
// route name, bound VirtualService rows and AUTO_PASSTHROUGH services) and
// the destination services of every bound VirtualService. Rows enter by
// key and content hash: equal digests mean equal output.
func (m *mergedGateway) computeDigest(names uint64, namespace, gateways, suffix string) {
	m.names = names
	var d xxhash.Digest
	d.Reset()
	var buf [8]byte
	u64 := func(v uint64) { binary.LittleEndian.PutUint64(buf[:], v); _, _ = d.Write(buf[:]) }
	str := func(s string) { u64(uint64(len(s))); _, _ = d.WriteString(s) }
	row := func(c *index.Config) {
		u64(uint64(c.Key.Namespace)<<32 | uint64(c.Key.Name))
		u64(uint64(c.Kind))
		u64(c.Hash)
	}
	svc := func(s *index.Service) {
		u64(uint64(s.Key.Namespace)<<32 | uint64(s.Key.Host))
		u64(s.Hash)
	}
	u64(names)
	str(namespace)
	str(gateways)
	str(m.sourceLabels)
	str(suffix)
	u64(uint64(len(m.ports)))
	for i := range m.ports {
		p := &m.ports[i]
		u64(uint64(p.number)<<8 | uint64(p.kind))
		u64(uint64(len(p.servers)))
		for j := range p.servers {
			s := &p.servers[j]
			row(s.Gateway)
			u64(uint64(s.Index))
			str(s.RouteName)
			u64(uint64(len(s.VirtualServices)))
			for _, c := range s.VirtualServices {
				row(c)
			}
			u64(uint64(len(s.Services)))
			for _, x := range s.Services {
				svc(x)
			}
		}
	}
	for _, ref := range strings.Split(gateways, ",") {
		str(ref)
		vss := m.boundVS[ref]
		u64(uint64(len(vss)))
		for _, c := range vss {
			row(c)
			ds := m.dests[c]
			u64(uint64(len(ds)))
			for _, x := range ds {
				svc(x)
			}
		}
	}
	m.digest = d.Sum64()
}
