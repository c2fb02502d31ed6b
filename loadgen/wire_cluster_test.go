package loadgen

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestDecodeClusterFieldOrders: the lazy cluster walk finds the name, the
// discovery type and the EDS service name whether the type comes second
// (field order, as vtprotobuf and pilotfish's direct encoder write it, where
// the walk stops early) or last (Go protobuf writes oneofs after the other
// fields); a STATIC or custom cluster names no EDS service.
func TestDecodeClusterFieldOrders(t *testing.T) {
	str := func(b []byte, num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	typ := func(b []byte, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, fClusterType, protowire.VarintType), v)
	}
	eds := str(nil, fClusterEDSConfig, string(str(nil, fEDSServiceName, "svc-eds")))
	tail := str(nil, 25, "metadata and the rest of the cluster")
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	name := str(nil, fClusterName, "c1")
	cases := []struct {
		what    string
		cluster []byte
		service string // "" : no EDS ref
	}{
		{"field order", cat(name, typ(nil, clusterTypeEDS), eds, tail), "svc-eds"},
		{"type last", cat(name, eds, tail, typ(nil, clusterTypeEDS)), "svc-eds"},
		{"no service name", cat(name, typ(nil, clusterTypeEDS), str(nil, fClusterEDSConfig, ""), tail), "c1"},
		{"eds config last", cat(name, typ(nil, clusterTypeEDS), tail, eds), "svc-eds"},
		{"static", cat(name, tail), ""},
		{"strict dns", cat(name, typ(nil, 1), tail, eds), ""},
		{"custom", cat(name, tail, str(nil, fClusterClusterType, "x")), ""},
	}
	for _, c := range cases {
		d := decoder{syms: newSymtab()}
		var r response
		got, err := d.cluster(c.cluster, &r)
		if err != nil || string(got) != "c1" {
			t.Errorf("%s: name %q, %v", c.what, got, err)
			continue
		}
		switch {
		case c.service == "" && len(r.entries) != 0:
			t.Errorf("%s: refs %v, want none", c.what, r.entries)
		case c.service != "" && (len(r.entries) != 1 || d.syms.name(r.entries[0].ref) != c.service):
			t.Errorf("%s: refs %v, want %s", c.what, r.entries, c.service)
		}
	}
}
