package engine

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// defaultTraceSampling is istiod's PILOT_TRACE_SAMPLING default.
const defaultTraceSampling = 1.0

// applyTracingMesh copies the mesh config's tracing into m.Tracing
// (docs/telemetry.md, "Tracing"), as istiod applies it to a proxy no
// Telemetry resource selects (its configureTracing):
//
//   - defaultProviders.tracing names a provider: its first name is looked
//     up among extensionProviders (case-insensitively); a zipkin, datadog,
//     skywalking or opentelemetry provider becomes the HCMs' tracer, any
//     other name leaves them without tracing. enableTracing is not read.
//   - else enableTracing (istiod's default true) gives the HCMs tracing
//     without a tracer (istio-agent's bootstrap sets it from
//     defaultConfig.tracing's zipkin, datadog, ... addresses).
//
// Either way defaultConfig.tracing's sampling, customTags and
// maxPathTagLength apply, and the Istio tags are added (in the second case
// unless enableIstioTags is false). A value Envoy would refuse, or a
// provider setting pilotfish does not generate, fails, naming the field.
func applyTracingMesh(m *encode.Mesh, cfg *meshv1alpha1.MeshConfig, traceSampling float64) error {
	m.Tracing, m.TraceDefaults = nil, nil
	names := cfg.GetDefaultProviders().GetTracing()
	off := len(names) == 0 && !cfg.GetEnableTracing()
	def := traceSampling
	if def == 0 {
		def = defaultTraceSampling
	}
	if def < 0 || def > 100 {
		if off {
			return nil // not read: no tracing
		}
		return fmt.Errorf("%w: PILOT_TRACE_SAMPLING %v: want 0 to 100", ErrBadMeshSetting, def)
	}
	sampling, tags, maxPath, istioTags, err := rules.TraceSettings(cfg.GetDefaultConfig().GetTracing(), def)
	if err != nil {
		if off {
			return nil
		}
		return fmt.Errorf("%w: defaultConfig: %v", ErrBadMeshSetting, err)
	}
	// What a Telemetry's tracing falls back to (istiod's proxy config
	// sampling and custom tags), whether or not the mesh traces.
	m.TraceDefaults = &encode.MeshTracing{Sampling: sampling, DefaultSampling: def, Tags: tags, MaxPathTagLength: maxPath}
	if off {
		return nil
	}
	t := &encode.MeshTracing{Sampling: sampling, DefaultSampling: def, Tags: tags, MaxPathTagLength: maxPath}
	if len(names) == 0 {
		t.IstioTags = istioTags
		m.Tracing = t
		return nil
	}
	t.HasDefaultProvider = true
	t.IstioTags = true // a Telemetry-style spec: enableIstioTags of proxy config is not read
	if ep := meshProvider(cfg, names[0]); ep != nil {
		p, err := traceProvider(ep)
		if err != nil {
			return fmt.Errorf("%w: extensionProviders %q: %v", ErrBadMeshSetting, ep.GetName(), err)
		}
		t.Provider = p
	}
	m.Tracing = t
	return nil
}

// traceProvider reads an extension provider of a tracing kind pilotfish
// generates; nil (no tracing, as istiod) for another kind. A setting it
// does not generate fails.
func traceProvider(ep *meshv1alpha1.MeshConfig_ExtensionProvider) (*encode.TraceProvider, error) {
	p := &encode.TraceProvider{Name: ep.GetName()}
	switch k := ep.GetProvider().(type) {
	case *meshv1alpha1.MeshConfig_ExtensionProvider_Zipkin:
		z := k.Zipkin
		p.Kind, p.Service, p.Port, p.MaxTagLength = encode.TraceZipkin, z.GetService(), z.GetPort(), z.GetMaxTagLength()
		p.Path, p.TraceID64 = z.GetPath(), z.GetEnable_64BitTraceId()
		p.W3C = z.GetTraceContextOption() == meshv1alpha1.MeshConfig_ExtensionProvider_ZipkinTracingProvider_USE_B3_WITH_W3C_PROPAGATION
		if err := traceTimeout(p, "zipkin.timeout", z.GetTimeout()); err != nil {
			return nil, err
		}
		p.Headers = traceHeaders(z.GetHeaders())
	case *meshv1alpha1.MeshConfig_ExtensionProvider_Datadog:
		d := k.Datadog
		p.Kind, p.Service, p.Port, p.MaxTagLength = encode.TraceDatadog, d.GetService(), d.GetPort(), d.GetMaxTagLength()
	case *meshv1alpha1.MeshConfig_ExtensionProvider_Skywalking:
		s := k.Skywalking
		p.Kind, p.Service, p.Port = encode.TraceSkyWalking, s.GetService(), s.GetPort()
	case *meshv1alpha1.MeshConfig_ExtensionProvider_Opentelemetry:
		o := k.Opentelemetry
		p.Kind, p.Service, p.Port, p.MaxTagLength = encode.TraceOpenTelemetry, o.GetService(), o.GetPort(), o.GetMaxTagLength()
		if o.GetSampling() != nil {
			return nil, fmt.Errorf("opentelemetry.dynatraceSampler is not supported")
		}
		if o.GetServiceAttributeEnrichment() == meshv1alpha1.MeshConfig_ExtensionProvider_OTEL_SEMANTIC_CONVENTIONS {
			return nil, fmt.Errorf("opentelemetry.serviceAttributeEnrichment OTEL_SEMANTIC_CONVENTIONS is not supported (a span service name per pod)")
		}
		if h := o.GetHttp(); h != nil {
			p.OTelHTTP, p.Path = true, h.GetPath()
			if _, err := url.JoinPath("collector", p.Path); err != nil {
				return nil, fmt.Errorf("opentelemetry.http.path %q: %v", p.Path, err)
			}
			if err := traceTimeout(p, "opentelemetry.http.timeout", h.GetTimeout()); err != nil {
				return nil, err
			}
			p.Headers = traceHeaders(h.GetHeaders())
		} else {
			g := o.GetGrpc()
			if err := traceTimeout(p, "opentelemetry.grpc.timeout", g.GetTimeout()); err != nil {
				return nil, err
			}
			p.Headers = traceHeaders(g.GetInitialMetadata())
		}
		p.EnvDetector = o.GetResourceDetectors().GetEnvironment() != nil
		p.DynatraceDetector = o.GetResourceDetectors().GetDynatrace() != nil
	default:
		// lightstep (deprecated; istiod generates nothing usable for it),
		// stackdriver, opencensus and non-tracing kinds: no tracing.
		return nil, nil
	}
	if p.Service == "" {
		return nil, fmt.Errorf("service must not be empty")
	}
	if p.Port < 1 || p.Port > 65535 {
		return nil, fmt.Errorf("port must be in [1, 65535], found %d", p.Port)
	}
	return p, nil
}

func traceTimeout(p *encode.TraceProvider, field string, d *durationpb.Duration) error {
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
		return fmt.Errorf("%s %s: want a duration of at least 0s", field, d.AsDuration())
	}
	p.Timeout, p.HasTimeout = d.AsDuration(), true
	return nil
}

// traceHeaders resolves headers: a value, or istiod's reading of an
// environment variable of the control plane's (envName).
func traceHeaders(hs []*meshv1alpha1.MeshConfig_ExtensionProvider_HttpHeader) []encode.TraceHeader {
	out := make([]encode.TraceHeader, 0, len(hs))
	for _, h := range hs {
		v := h.GetValue()
		if env := h.GetEnvName(); env != "" {
			v = os.Getenv(env)
		}
		out = append(out, encode.TraceHeader{Name: h.GetName(), Value: v})
	}
	if len(out) == 0 {
		return nil
	}
	return slices.Clip(out)
}

// mayTrace reports whether m's HCMs may trace: the mesh config traces,
// or it has a tracing provider a Telemetry may name. It depends on the
// mesh only, so a Telemetry's change needs no reclassification; a mesh
// with tracing providers but no Telemetry using them has classes per
// tracing identity whose listeners still share bytes (their tracing is
// off, so the identity is not in their keys).
func mayTrace(m *encode.Mesh) bool {
	if m.Tracing != nil {
		return true
	}
	for i := range m.TelemetryProviders {
		if m.TelemetryProviders[i].Trace != nil {
			return true
		}
	}
	return false
}

// traceIdentity is what the Istio tracing tags say of node, with istiod's
// defaults (buildServiceTags).
func traceIdentity(node *Node) encode.TraceIdentity {
	id := encode.TraceIdentity{
		CanonicalService:  node.Labels["service.istio.io/canonical-name"],
		CanonicalRevision: node.Labels["service.istio.io/canonical-revision"],
		MeshID:            node.MeshID,
		Namespace:         node.Namespace,
		ClusterID:         node.ClusterID,
		ServiceCluster:    node.ServiceCluster,
		ProxyConfig:       node.TraceProxyConfig,
	}
	for _, f := range []struct {
		v   *string
		def string
	}{{&id.CanonicalService, "unknown"}, {&id.CanonicalRevision, "latest"}, {&id.MeshID, "unknown"}, {&id.Namespace, "default"}, {&id.ClusterID, "unknown"}} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	return id
}

// touchesTracing reports whether the changes hold the service of a
// tracing provider HCMs may use: the mesh's default one and, when
// Telemetry resources exist, any a Telemetry may name. Every class's HCMs
// depend on that service existing, whatever the class's scope sees
// (istiod looks it up in the whole registry), so such a change cannot be
// scoped.
func (s *scopedChanges) touchesTracing(snap *index.Snapshot, mesh *encode.Mesh) bool {
	if s == nil {
		return false
	}
	if mesh.Tracing != nil && mesh.Tracing.Provider != nil && s.touchesHost(snap, mesh.Tracing.Provider.Service) {
		return true
	}
	if snap.NumConfigs(index.ConfigTelemetry) == 0 {
		return false
	}
	for i := range mesh.TelemetryProviders {
		if p := mesh.TelemetryProviders[i].Trace; p != nil && s.touchesHost(snap, p.Service) {
			return true
		}
	}
	return false
}

// touchesHost reports whether the changes hold a service of host
// ("HOST" or "NAMESPACE/HOST").
func (s *scopedChanges) touchesHost(snap *index.Snapshot, host string) bool {
	if _, h, ok := strings.Cut(host, "/"); ok {
		host = h
	}
	sym, ok := snap.Symbols.Lookup(host)
	if !ok {
		return false
	}
	for k := range s.services {
		if k.Host == sym {
			return true
		}
	}
	return false
}
