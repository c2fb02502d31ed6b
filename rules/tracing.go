package rules

import (
	"strconv"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// tracingOf is the tracing of a class's HTTP connection managers, as
// istiod's configureTracing gives it from the mesh config (no Telemetry
// resource): the mesh's settings with the class's identity, and the
// default provider's collector cluster, looked up in the registry at every
// build as istiod's LookupCluster does (a provider whose service is not
// there leaves the HCMs without tracing, as in istiod, until it appears).
// Client and server sides are the same without Telemetry; a Telemetry
// tracing spec would be merged here per side.
func tracingOf(sc *Scope, mesh *encode.Mesh) encode.Tracing {
	mt := mesh.Tracing
	if mt == nil {
		return encode.Tracing{}
	}
	t := encode.Tracing{
		On:               true,
		Sampling:         mt.Sampling,
		IstioTags:        mt.IstioTags,
		Tags:             mt.Tags,
		MaxPathTagLength: mt.MaxPathTagLength,
	}
	if t.IstioTags {
		t.Identity = sc.Class.Trace
		t.Identity.ServiceCluster = ""
	}
	if !mt.HasDefaultProvider {
		return t // enableTracing: the bootstrap's tracer
	}
	p := mt.Provider
	if p == nil {
		return encode.Tracing{}
	}
	host, err := lookupProviderService(sc.Snapshot, p.Service)
	if err != nil {
		return encode.Tracing{}
	}
	t.Provider = p
	t.Hostname = host
	t.Cluster = "outbound|" + strconv.FormatUint(uint64(p.Port), 10) + "||" + host
	t.SpawnUpstreamSpan = sc.Class.Type == encode.ProxyRouter || p.Kind == encode.TraceSkyWalking
	switch p.Kind {
	case encode.TraceDatadog, encode.TraceOpenTelemetry:
		// The span service name is the node's cluster.
		t.Identity.ServiceCluster = sc.Class.Trace.ServiceCluster
	case encode.TraceZipkin:
		t.ZipkinHTTPService = istioAtLeast(sc.Class.IstioVersion, 29)
		t.ZipkinTraceContext = istioAtLeast(sc.Class.IstioVersion, 28)
	}
	return t
}

// istioAtLeast reports whether a "1.N" Istio version is 1.minor or later
// ("": unknown, as istiod treats a proxy without a version: no).
func istioAtLeast(v string, minor int) bool {
	major, rest, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(rest)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > 1 || (ma == 1 && mi >= minor)
}
