package encode

import (
	"strconv"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// VirtualHostKey is every input of one virtual host of an outbound route
// configuration: one service (or one VirtualService host that names no
// service) on one port, the VirtualService that routes it, and the few
// proxy and mesh settings a virtual host depends on. It is the grain RDS is
// cached at: a changed service re-encodes its own virtual host only.
//
// It holds the proxy's namespace and type rather than its whole class, so
// that classes differing in locality or network share virtual hosts.
type VirtualHostKey struct {
	// Type: proxyless gRPC virtual hosts list domains with and without the
	// port and use max_stream_duration; sidecars ignore the port in host
	// matching.
	Type ProxyType
	// Namespace is the proxy's namespace: short-name domains and
	// sourceNamespace matches depend on it.
	Namespace string
	// DomainSuffix is the mesh's DNS domain ("cluster.local").
	DomainSuffix string
	// Port is the route configuration's port.
	Port uint32
	// Service is the service the virtual host is for; nil for a
	// VirtualService host that names no service (then Host is set).
	Service *index.Service
	// Host is the VirtualService host when Service is nil.
	Host string
	// VirtualService routes the host; nil means istiod's default route.
	VirtualService *index.Config
	// Aliases are the Kubernetes ExternalName services whose target is
	// Service: their names are domains of this virtual host.
	Aliases []*index.Service
	// Destinations are the ExternalName services the VirtualService routes
	// to: their clusters are named after the ExternalName target.
	Destinations []*index.Service
	// DestinationRules are the DestinationRules, with a consistent hash
	// load balancer, of the hosts the virtual host routes to (its service
	// for the default route, the VirtualService's destinations): routes to
	// them carry the matching hash policy, as istiod's do.
	DestinationRules []HostDestinationRule
	// Sniffed builds the virtual host of a protocol-sniffed service's own
	// route configuration ("host:port"): its only domain is "*".
	Sniffed bool
	// SourceLabels are the proxy's labels whose keys the VirtualService's
	// match sourceLabels name, as sorted "k=v" lines ("" for none): a match
	// with sourceLabels applies when they hold them all.
	SourceLabels string
	// Exclude lists the hashes (see VirtualHostDomainHash) of domains an
	// earlier virtual host of the same route configuration already claims;
	// they are left out, as istiod dedupes domains across virtual hosts.
	Exclude []uint64
	// Retry is the mesh's defaultHttpRetryPolicy: the retries of the
	// default route and of routes that set none.
	Retry HTTPRetry
}

// Hash feeds every field.
func (k *VirtualHostKey) Hash() uint64 {
	h := NewHasher("VirtualHostKey")
	h.U32(uint32(k.Type))
	h.Str(k.Namespace)
	h.Str(k.DomainSuffix)
	h.U32(k.Port)
	hashSvcRow(&h, k.Service)
	h.Str(k.Host)
	hashCfgRow(&h, k.VirtualService)
	hashSvcRows(&h, k.Aliases)
	hashSvcRows(&h, k.Destinations)
	h.Int(len(k.DestinationRules))
	for i := range k.DestinationRules {
		h.Str(k.DestinationRules[i].Host)
		hashCfgRow(&h, k.DestinationRules[i].Rule)
	}
	h.Bool(k.Sniffed)
	h.Str(k.SourceLabels)
	h.Int(len(k.Exclude))
	for _, x := range k.Exclude {
		h.U64(x)
	}
	k.Retry.hashInto(&h)
	return h.Sum()
}

// HostDestinationRule is the DestinationRule that applies to a host.
type HostDestinationRule struct {
	Host string
	Rule *index.Config
}

// hashSvcRow feeds a service row by its content hash (0 marks nil).
func hashSvcRow(h *Hasher, s *index.Service) {
	if s == nil {
		h.U64(0)
		return
	}
	h.U64(1)
	h.U64(s.Hash)
}

func hashSvcRows(h *Hasher, ss []*index.Service) {
	h.Int(len(ss))
	for _, s := range ss {
		hashSvcRow(h, s)
	}
}

// hashCfgRow feeds a config row by its key and content hash (0 marks nil).
// The key is fed too: ingest's hash covers the spec, and a generator may
// print the name (route metadata, stat prefixes).
func hashCfgRow(h *Hasher, c *index.Config) {
	if c == nil {
		h.U64(0)
		return
	}
	h.U64(1)
	h.U32(uint32(c.Kind))
	h.U32(uint32(c.Key.Namespace))
	h.U32(uint32(c.Key.Name))
	h.U64(c.Hash)
}

func hashCfgRows(h *Hasher, cs []*index.Config) {
	h.Int(len(cs))
	for _, c := range cs {
		hashCfgRow(h, c)
	}
}

// Name returns the virtual host's name, "HOST:PORT".
func (k *VirtualHostKey) Name(n index.Names) string {
	return k.hostname(n) + ":" + strconv.FormatUint(uint64(k.Port), 10)
}

func (k *VirtualHostKey) hostname(n index.Names) string {
	if k.Service != nil {
		return n.String(k.Service.Key.Host)
	}
	return k.Host
}

// VirtualHostGen generates VirtualHostKey's part; most virtual hosts are
// written directly (vhost_direct.go).
var VirtualHostGen = partGenAppend(KindVirtualHost, VirtualHost, appendVirtualHost)

// VirtualHost generates the virtual host of k. A VirtualService host that
// names no service and gets no route on this port yields an empty virtual
// host (no name): route configurations leave it out.
func VirtualHost(n index.Names, k *VirtualHostKey) (string, proto.Message) {
	routes := vhRoutes(n, k)
	if len(routes) == 0 {
		return "", &route.VirtualHost{}
	}
	name := k.Name(n)
	var domains []string
	if k.Sniffed {
		domains = []string{"*"}
	} else {
		domains = k.domainStrings(n)
	}
	if len(domains) == 0 {
		return "", &route.VirtualHost{}
	}
	return name, &route.VirtualHost{
		Name:                       name,
		Domains:                    domains,
		Routes:                     routes,
		IncludeRequestAttemptCount: true,
	}
}

// vhRoutes returns the routes of k: the VirtualService's for this port, or
// istiod's default route when there is none or it has no route for this
// port and the host is a service.
func vhRoutes(n index.Names, k *VirtualHostKey) []*route.Route {
	if k.VirtualService != nil {
		if vs, ok := k.VirtualService.Spec.(*networking.VirtualService); ok {
			rc := routeCtx{k: k, names: n, vs: vs}
			if routes := rc.virtualServiceRoutes(); len(routes) > 0 {
				return routes
			}
		}
	}
	if k.Service == nil {
		return nil
	}
	host := n.String(k.Service.Key.Host)
	r := defaultOutboundRoute(outboundClusterName(k.Port, "", host), host, k.Port, &k.Retry)
	if hp := rtHashPolicy(k.serviceConsistentHash(host)); hp != nil {
		r.GetRoute().HashPolicy = []*route.RouteAction_HashPolicy{hp}
	}
	return []*route.Route{r}
}

// outboundClusterName is istiod's subset key, `outbound|PORT|SUBSET|HOST`.
func outboundClusterName(port uint32, subset, host string) string {
	var buf [24]byte
	p := strconv.AppendUint(buf[:0], uint64(port), 10)
	return "outbound|" + string(p) + "|" + subset + "|" + host
}
