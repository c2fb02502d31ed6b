package encode

import (
	"hash/maphash"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// vhDomain is one domain of a virtual host, kept in parts so that it can be
// hashed without building the string: wild "*." + host + dot "." or an
// address, then ":" + port when port is not 0.
type vhDomain struct {
	host string
	addr netip.Prefix // when host is ""
	port uint32
	wild bool
	dot  bool
	// alt marks istiod's "expanded" names (short names, the absolute FQDN):
	// they yield to a service whose hostname is that name.
	alt bool
}

// appendText appends the domain's text to dst.
func (d *vhDomain) appendText(dst []byte) []byte {
	if d.wild {
		dst = append(dst, "*."...)
	}
	if d.host != "" {
		dst = append(dst, d.host...)
		if d.dot {
			dst = append(dst, '.')
		}
	} else if d.addr.IsSingleIP() {
		a := d.addr.Addr()
		if a.Is6() && !a.Is4In6() {
			dst = append(dst, '[')
			dst = a.AppendTo(dst)
			dst = append(dst, ']')
		} else {
			dst = a.AppendTo(dst)
		}
	} else {
		dst = d.addr.AppendTo(dst)
	}
	if d.port != 0 {
		dst = append(dst, ':')
		dst = strconv.AppendUint(dst, uint64(d.port), 10)
	}
	return dst
}

func (d *vhDomain) String() string {
	var buf [96]byte
	return string(d.appendText(buf[:0]))
}

// hash returns the domain's hash; it allocates only for hostnames longer
// than any DNS name.
func (d *vhDomain) hash() uint64 {
	if len(d.host) <= 200 {
		var buf [256]byte
		return maphash.Bytes(domainSeed, d.appendText(buf[:0]))
	}
	return maphash.String(domainSeed, d.String())
}

// domainSeed seeds domain hashes. They only ever meet other hashes of this
// process (exclusion lists inside cache keys), so a per-process seed does.
var domainSeed = maphash.MakeSeed()

// VirtualHostDomainHash returns the hash of a domain string as
// VirtualHostKey.Exclude and VirtualHostKey.AppendDomainHashes use it.
func VirtualHostDomainHash(domain string) uint64 { return maphash.String(domainSeed, domain) }

// DomainHash is a domain of a virtual host by hash, with istiod's "expanded
// name" bit (see VirtualHostKey.AppendDomainHashes).
type DomainHash struct {
	Hash uint64
	// Alt marks an expanded name (a short name or the absolute FQDN): a
	// route configuration drops it when another of its virtual hosts is
	// for a service of that exact hostname.
	Alt bool
}

// AppendDomainHashes appends the hashes of the domains k generates before
// exclusions, in order. The engine uses them to find the domains an earlier
// virtual host of the same route configuration claims (k.Exclude) without
// building strings.
func (k *VirtualHostKey) AppendDomainHashes(n index.Names, dst []DomainHash) []DomainHash {
	if k.Sniffed {
		return append(dst, DomainHash{Hash: VirtualHostDomainHash("*")})
	}
	var buf [32]vhDomain
	for _, d := range k.appendDomains(n, buf[:0]) {
		dst = append(dst, DomainHash{Hash: d.hash(), Alt: d.alt})
	}
	return dst
}

// KnownHostHashes appends the hashes of the names istiod records as known
// FQDNs for a service virtual host: the hostname and "hostname:port".
func (k *VirtualHostKey) KnownHostHashes(n index.Names, dst []uint64) []uint64 {
	if k.Service == nil {
		return dst
	}
	host := n.String(k.Service.Key.Host)
	d := vhDomain{host: host}
	dst = append(dst, d.hash())
	d.port = k.Port
	return append(dst, d.hash())
}

// domainStrings returns the domains of k, without the excluded ones and
// without repeats.
func (k *VirtualHostKey) domainStrings(n index.Names) []string {
	var buf [32]vhDomain
	ds := k.keptDomains(n, buf[:0])
	out := make([]string, 0, len(ds))
	for i := range ds {
		out = append(out, ds[i].String())
	}
	return out
}

// keptDomains appends k's domains to dst without the excluded ones and
// without repeats.
func (k *VirtualHostKey) keptDomains(n index.Names, dst []vhDomain) []vhDomain {
	var allBuf [32]vhDomain
	var seenBuf [32]uint64
	all, seen := k.appendDomains(n, allBuf[:0]), seenBuf[:0]
	for i := range all {
		h := all[i].hash()
		if containsU64(k.Exclude, h) || containsU64(seen, h) {
			continue
		}
		seen = append(seen, h)
		dst = append(dst, all[i])
	}
	return dst
}

func containsU64(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// appendDomains appends the domains istiod generates for the virtual host
// (generateVirtualHostDomains): the hostname, its absolute form and, for
// Kubernetes services seen from a Kubernetes namespace, the short names;
// the same for each alias; "*." forms for headless Kubernetes services;
// then the VIPs. Sidecars ignore the port in host matching, so they get no
// ":port" forms; proxyless gRPC gets both.
func (k *VirtualHostKey) appendDomains(n index.Names, dst []vhDomain) []vhDomain {
	port := k.Port
	if k.Type != ProxyGRPC {
		port = 0
	}
	if k.Service == nil {
		dst = append(dst, vhDomain{host: k.Host})
		if port != 0 {
			dst = append(dst, vhDomain{host: k.Host, port: port})
		}
		return dst
	}
	svc := k.Service
	dst = k.appendHostDomains(dst, n.String(svc.Key.Host), port)
	for _, a := range k.Aliases {
		dst = k.appendHostDomains(dst, n.String(a.Key.Host), port)
	}
	if svc.Resolution == index.ResolutionPassthrough && svc.Origin == index.OriginKubernetes {
		n := len(dst)
		for i := 0; i < n; i++ {
			d := dst[i]
			d.wild = true
			dst = append(dst, d)
		}
	}
	for _, a := range svc.Addresses {
		if a.IsSingleIP() && a.Addr().IsUnspecified() {
			continue
		}
		dst = append(dst, vhDomain{addr: a})
		if port != 0 {
			dst = append(dst, vhDomain{addr: a, port: port})
		}
	}
	return dst
}

// appendHostDomains appends a hostname, with its port, and its alternate
// names (istiod's appendDomainPort + GenerateAltVirtualHosts).
func (k *VirtualHostKey) appendHostDomains(dst []vhDomain, host string, port uint32) []vhDomain {
	dst = append(dst, vhDomain{host: host})
	if port != 0 {
		dst = append(dst, vhDomain{host: host, port: port})
	}
	// The absolute FQDN ("host.") unless the host is an IP address.
	if !isIPLiteral(host) {
		dst = append(dst, vhDomain{host: host, dot: true, alt: true})
	}
	if port != 0 {
		dst = append(dst, vhDomain{host: host, dot: true, port: port, alt: true})
	}
	// Kubernetes short names. The proxy's DNS domain is
	// "NS.svc.SUFFIX", so only hosts of the form NAME.NS.svc.SUFFIX expand.
	suffix := ".svc." + k.DomainSuffix
	if k.Namespace == "" || !strings.HasSuffix(host, suffix) {
		return dst
	}
	ih := len(host) - len(suffix) // index of ".svc."
	dot := strings.IndexByte(host, '.')
	if dot <= 0 || dot+1 > ih {
		return dst
	}
	nameNS := host[:ih]                // NAME.NS
	nameNSsvc := host[:ih+4]           // NAME.NS.svc
	if host[dot+1:ih] == k.Namespace { // same namespace: NAME too
		dst = append(dst, vhDomain{host: host[:dot], alt: true})
		if port != 0 {
			dst = append(dst, vhDomain{host: host[:dot], port: port, alt: true})
		}
		dst = append(dst, vhDomain{host: nameNSsvc, alt: true})
		if port != 0 {
			dst = append(dst, vhDomain{host: nameNSsvc, port: port, alt: true})
		}
		dst = append(dst, vhDomain{host: nameNS, alt: true})
		if port != 0 {
			dst = append(dst, vhDomain{host: nameNS, port: port, alt: true})
		}
		return dst
	}
	dst = append(dst, vhDomain{host: nameNS, alt: true})
	if port != 0 {
		dst = append(dst, vhDomain{host: nameNS, port: port, alt: true})
	}
	dst = append(dst, vhDomain{host: nameNSsvc, alt: true})
	if port != 0 {
		dst = append(dst, vhDomain{host: nameNSsvc, port: port, alt: true})
	}
	return dst
}

// isIPLiteral reports whether s is an IP address, without netip's error
// allocation for the common case of a hostname.
func isIPLiteral(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && c != '.' && c != ':' && (c|0x20 < 'a' || c|0x20 > 'f') {
			return false
		}
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}
