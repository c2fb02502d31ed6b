package envoypatch

import (
	"slices"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// VirtualHostPart is one virtual host of a route configuration under
// patching: its wire encoding, decoded only when a patch changes it. A
// route configuration assembled from shared virtual host bytes is patched
// without decoding (and re-encoding) the hosts no patch names.
type VirtualHostPart struct {
	// Bytes is the VirtualHost's encoding (shared: never written); it is
	// ignored once Message is set.
	Bytes []byte
	// Message is the decoded, patched or added virtual host; nil while no
	// patch has changed the host.
	Message *route.VirtualHost
}

// VirtualHost field numbers (envoy.config.route.v3.VirtualHost).
const (
	vhNameField    protowire.Number = 1
	vhDomainsField protowire.Number = 2
)

// decode makes the part's Message from its Bytes, once.
func (vp *VirtualHostPart) decode() error {
	if vp.Message != nil {
		return nil
	}
	vh := &route.VirtualHost{}
	if err := proto.Unmarshal(vp.Bytes, vh); err != nil {
		return err
	}
	vp.Message = vh
	return nil
}

// nameIs reports whether the host's name is name, without decoding it.
func (vp *VirtualHostPart) nameIs(name string) bool {
	if vp.Message != nil {
		return vp.Message.GetName() == name
	}
	return string(wireName(vp.Bytes)) == name
}

// name is the host's name (allocated for an encoded host: for removals).
func (vp *VirtualHostPart) name() string {
	if vp.Message != nil {
		return vp.Message.GetName()
	}
	return string(wireName(vp.Bytes))
}

// hasDomain reports whether domain is among the host's domains.
func (vp *VirtualHostPart) hasDomain(domain string) bool {
	if vp.Message != nil {
		return slices.Contains(vp.Message.GetDomains(), domain)
	}
	found := false
	wireStrings(vp.Bytes, vhDomainsField, func(d []byte) bool {
		found = string(d) == domain
		return !found
	})
	return found
}

// matches is virtualHostMatch on a part.
func (vp *VirtualHostPart) matches(p *Patch) bool {
	if vp.Message != nil {
		return virtualHostMatch(vp.Message, p)
	}
	m := p.Match.GetRouteConfiguration().GetVhost()
	if m == nil {
		return true
	}
	return (m.GetName() == "" || vp.nameIs(m.GetName())) &&
		(m.GetDomainName() == "" || vp.hasDomain(m.GetDomainName()))
}

// wireName is an encoded virtual host's name: the last occurrence of the
// field, as a decoder keeps (generated encodings hold one).
func wireName(b []byte) []byte {
	var name []byte
	wireStrings(b, vhNameField, func(v []byte) bool { name = v; return true })
	return name
}

// wireStrings calls each for every occurrence of the length-delimited
// field num of the encoded message b, in order, until it returns false.
// Malformed bytes end the walk: decoding reports them when a patch needs
// the host.
func wireStrings(b []byte, num protowire.Number, each func([]byte) bool) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 || !each(v) {
				return
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return
		}
		b = b[l:]
	}
}
