package ingest

import (
	"net/netip"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Converter turns decoded objects into index batch operations. It remembers
// which rows each object produced, so that an update removes the rows an
// object no longer produces (a ServiceEntry that drops a host) and a delete
// removes them all. It is used by one source goroutine at a time.
type Converter struct {
	syms   *index.Symbols
	labels *index.LabelSets
	// DomainSuffix is the cluster DNS domain ("cluster.local").
	domain   string
	produced map[ObjectKey]refList
	// scratch is the buffer rows builds ref lists in (convert_refs.go).
	scratch []rowRef
	// groups is entryGroups' reusable list (the batch copies the groups).
	groups []index.EndpointGroup
	// refHome, when set by a converter, is where Put keeps the object's
	// ref list if it has more than one (convert_refs.go).
	refHome []rowRef
	// locBuf builds endpoint localities (localitySym).
	locBuf []byte
	// hashBuf holds a spec's encoding while configHash hashes it.
	hashBuf []byte
	// nodes maps a Node's name to its locality (source_kube.go); the file
	// source has no Nodes and leaves it empty.
	nodes map[string]string
}

// rowRef names one row an object produced, in 16 bytes (one is kept per
// row for the life of the object): the table, a kind where the table needs
// one, and up to three symbols whose meaning depends on the table.
type rowRef struct {
	table rowTable
	kind  uint8     // index.WorkloadKind or index.ConfigKind
	a, b  index.Sym // services/endpoints: host, namespace; workloads/configs: namespace, name; namespaces: name
	c     index.Sym // endpoints: group source
}

func serviceRef(k index.ServiceKey) rowRef {
	return rowRef{table: tableServices, a: k.Host, b: k.Namespace}
}

func endpointsRef(k index.ServiceKey, source index.Sym) rowRef {
	return rowRef{table: tableEndpoints, a: k.Host, b: k.Namespace, c: source}
}

func workloadRef(k index.WorkloadKey) rowRef {
	return rowRef{table: tableWorkloads, kind: uint8(k.Kind), a: k.Namespace, b: k.Name}
}

func configRef(kind index.ConfigKind, k index.ConfigKey) rowRef {
	return rowRef{table: tableConfigs, kind: uint8(kind), a: k.Namespace, b: k.Name}
}

func namespaceRef(name index.Sym) rowRef { return rowRef{table: tableNamespaces, a: name} }

type rowTable uint8

const (
	tableNamespaces rowTable = iota
	tableWorkloads
	tableServices
	tableEndpoints
	tableConfigs
)

// NewConverter returns a converter for the writer's symbol tables; domain is
// the cluster DNS suffix, e.g. "cluster.local".
func NewConverter(w *index.Writer, domain string) *Converter {
	return &Converter{syms: w.Symbols(), labels: w.Labels(), domain: domain, produced: map[ObjectKey]refList{}}
}

// Put adds the operations that make the index reflect o. The converters
// see o's metadata through converterView: only what they may read, which
// is what a config row's hash covers.
func (c *Converter) Put(b *index.Batch, o *Object) {
	refs := c.rows(b, converterView(o))
	home := c.refHome
	c.refHome = nil
	k := o.Key()
	old, known := c.produced[k]
	if known {
		c.retire(b, old.refs(), refs)
	}
	if len(refs) == 0 {
		delete(c.produced, k)
		return
	}
	c.produced[k] = keepRefs(refs, home)
	c.scratch = refs[:0] // keep a grown buffer
}

// Delete adds the operations that remove every row the object produced.
func (c *Converter) Delete(b *index.Batch, k ObjectKey) {
	old := c.produced[k]
	c.retire(b, old.refs(), nil)
	delete(c.produced, k)
}

// Known reports whether an object with key k has been put.
func (c *Converter) Known(k ObjectKey) bool {
	_, ok := c.produced[k]
	return ok
}

// retire deletes the rows in old that are not in keep.
func (c *Converter) retire(b *index.Batch, old, keep []rowRef) {
	for _, r := range old {
		if containsRef(keep, r) {
			continue
		}
		switch r.table {
		case tableNamespaces:
			b.DeleteNamespace(r.a)
		case tableWorkloads:
			b.DeleteWorkload(index.WorkloadKey{Kind: index.WorkloadKind(r.kind), Namespace: r.a, Name: r.b})
		case tableServices:
			b.DeleteService(index.ServiceKey{Host: r.a, Namespace: r.b})
		case tableEndpoints:
			b.DeleteEndpoints(index.ServiceKey{Host: r.a, Namespace: r.b}, r.c)
		case tableConfigs:
			b.DeleteConfig(index.ConfigKind(r.kind), index.ConfigKey{Namespace: r.a, Name: r.b})
		}
	}
}

func containsRef(refs []rowRef, r rowRef) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// rows emits the Put operations for o and returns the rows it produced.
func (c *Converter) rows(b *index.Batch, o *Object) []rowRef {
	switch o.Kind {
	case KindNamespace:
		return c.namespace(b, o)
	case KindService:
		return c.service(b, o)
	case KindEndpointSlice:
		return c.endpointSlice(b, o)
	case KindPod:
		return c.pod(b, o)
	case KindServiceEntry:
		return c.serviceEntry(b, o)
	case KindWorkloadEntry:
		return c.workloadEntry(b, o)
	case KindSecret:
		return c.secret(b, o)
	default:
		if kind, ok := configKinds[o.Kind]; ok {
			return c.oneRef(c.config(b, o, kind, nil))
		}
	}
	return nil
}

var configKinds = map[Kind]index.ConfigKind{
	KindVirtualService:        index.ConfigVirtualService,
	KindDestinationRule:       index.ConfigDestinationRule,
	KindGateway:               index.ConfigGateway,
	KindSidecar:               index.ConfigSidecar,
	KindServiceEntry:          index.ConfigServiceEntry,
	KindWorkloadEntry:         index.ConfigWorkloadEntry,
	KindAuthorizationPolicy:   index.ConfigAuthorizationPolicy,
	KindPeerAuthentication:    index.ConfigPeerAuthentication,
	KindRequestAuthentication: index.ConfigRequestAuthentication,
	KindEnvoyFilter:           index.ConfigEnvoyFilter,
	KindWasmPlugin:            index.ConfigWasmPlugin,
	KindTelemetry:             index.ConfigTelemetry,
}

// sym interns s.
func (c *Converter) sym(s string) index.Sym { return c.syms.Intern(s) }

// labelSet interns a label map.
func (c *Converter) labelSet(m map[string]string) index.LabelSetID {
	if len(m) == 0 {
		return 0
	}
	var stack [8]index.Label // most label maps are small: no allocation
	ls := stack[:0]
	for k, v := range m {
		ls = append(ls, index.Label{Key: c.sym(k), Value: c.sym(v)})
	}
	return c.labels.Intern(ls)
}

// fqdn resolves a short host name relative to namespace ns, as istiod does
// for VirtualService and DestinationRule hosts: a name without a dot is a
// Kubernetes service in ns.
func (c *Converter) fqdn(host, ns string) string {
	if host == "*" || strings.Contains(host, ".") {
		return host
	}
	return host + "." + ns + ".svc." + c.domain
}

// exportTo converts an exportTo list ("*", ".", "~", namespaces); an
// empty one is Unset (the mesh's default applies, resolved by rules).
func (c *Converter) exportTo(list []string) index.ExportTo {
	if len(list) == 0 {
		return index.ExportTo{Unset: true}
	}
	var e index.ExportTo
	for _, x := range list {
		switch x {
		case "*":
			return index.ExportTo{}
		case ".":
			e.Private = true
		case "~":
			return index.ExportTo{None: true}
		default:
			e.Namespaces = append(e.Namespaces, c.sym(x))
		}
	}
	return e
}

// parsePrefix parses an IP or CIDR; it reports false for anything else.
func parsePrefix(s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		if a, err := netip.ParseAddr(s); err == nil {
			return netip.PrefixFrom(a, a.BitLen()), true
		}
		return netip.Prefix{}, false
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// protocolOf maps an Istio protocol name or port-name prefix to a Protocol,
// following Istio's protocol selection: "http", "http-web", "grpc-api"...
func protocolOf(name string) index.Protocol {
	p := name
	if i := strings.IndexByte(p, '-'); i >= 0 {
		p = p[:i]
	}
	// EqualFold, not ToLower: this runs for every port of every object, and
	// ToLower allocates for the usual upper-case "HTTP".
	for _, x := range protocolPrefixes {
		if strings.EqualFold(p, x.name) {
			if x.proto == index.ProtocolGRPC && len(name) >= len("grpc-web") && strings.EqualFold(name[:len("grpc-web")], "grpc-web") {
				return index.ProtocolGRPCWeb
			}
			return x.proto
		}
	}
	return index.ProtocolUnknown
}

var protocolPrefixes = [...]struct {
	name  string
	proto index.Protocol
}{
	{"http", index.ProtocolHTTP},
	{"http2", index.ProtocolHTTP2},
	{"https", index.ProtocolHTTPS},
	{"grpc", index.ProtocolGRPC},
	{"tcp", index.ProtocolTCP},
	{"tls", index.ProtocolTLS},
	{"mongo", index.ProtocolMongo},
	{"redis", index.ProtocolRedis},
	{"mysql", index.ProtocolMySQL},
	{"udp", index.ProtocolUDP},
}
