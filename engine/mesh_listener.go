package engine

import (
	"fmt"
	"regexp"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// The MeshConfig fields that shape listeners, routes and visibility
// (docs/mesh-config.md, "Listeners, routes and visibility"): rootNamespace,
// default{Service,VirtualService,DestinationRule}ExportTo,
// pathNormalization, defaultHttpRetryPolicy, inboundTrafficPolicy,
// protocolDetectionTimeout, and what pilotfish does not implement and so
// refuses rather than ignore: other listener ports (proxyListenPort,
// proxyInboundListenPort, proxyHttpPort) and serviceEntryVisibility for
// sidecars.

// Istio's fixed listener ports: iptables (set up by injection) redirects to
// them, and pilotfish's listeners are built on them.
const (
	meshProxyListenPort        = 15001
	meshProxyInboundListenPort = 15006
)

// dnsLabel is a Kubernetes namespace name (RFC 1123 label).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// applyListenerMesh copies cfg's listener, route and visibility fields into
// m (cfg has istiod's defaults applied). A value pilotfish cannot honour
// fails, naming the field; m is then partly written and must be dropped.
func applyListenerMesh(m *encode.Mesh, cfg *meshv1alpha1.MeshConfig) error {
	if ns := cfg.GetRootNamespace(); !dnsLabel.MatchString(ns) {
		return fmt.Errorf("%w: rootNamespace %q: want a namespace name", ErrBadMeshSetting, ns)
	}
	m.RootNamespace = cfg.GetRootNamespace()

	for _, f := range []struct {
		field string
		in    []string
		out   *[]string
	}{
		{"defaultServiceExportTo", cfg.GetDefaultServiceExportTo(), &m.DefaultServiceExportTo},
		{"defaultVirtualServiceExportTo", cfg.GetDefaultVirtualServiceExportTo(), &m.DefaultVirtualServiceExportTo},
		{"defaultDestinationRuleExportTo", cfg.GetDefaultDestinationRuleExportTo(), &m.DefaultDestinationRuleExportTo},
	} {
		list, err := meshExportTo(f.field, f.in)
		if err != nil {
			return err
		}
		*f.out = list
	}

	switch n := cfg.GetPathNormalization().GetNormalization(); n {
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_DEFAULT, meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE:
		m.PathNormalization = encode.PathNormalizeBase
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE:
		m.PathNormalization = encode.PathNormalizeNone
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_MERGE_SLASHES:
		m.PathNormalization = encode.PathNormalizeMergeSlashes
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES:
		m.PathNormalization = encode.PathNormalizeDecodeAndMergeSlashes
	default:
		return fmt.Errorf("%w: pathNormalization.normalization %d is unknown", ErrBadMeshSetting, n)
	}

	retry, err := meshRetry(cfg.GetDefaultHttpRetryPolicy())
	if err != nil {
		return err
	}
	m.DefaultRetry = retry

	switch mode := cfg.GetInboundTrafficPolicy().GetMode(); mode {
	case meshv1alpha1.MeshConfig_InboundTrafficPolicy_PASSTHROUGH:
		m.InboundTrafficPolicy = encode.InboundPassthrough
	case meshv1alpha1.MeshConfig_InboundTrafficPolicy_LOCALHOST:
		m.InboundTrafficPolicy = encode.InboundLocalhost
	default:
		return fmt.Errorf("%w: inboundTrafficPolicy.mode %d is unknown", ErrBadMeshSetting, mode)
	}

	// istiod's ValidateProtocolDetectionTimeout: 0 disables it, else whole
	// milliseconds.
	if d := cfg.GetProtocolDetectionTimeout(); d != nil {
		if err := d.CheckValid(); err != nil {
			return fmt.Errorf("%w: protocolDetectionTimeout: %v", ErrBadMeshSetting, err)
		}
		t := d.AsDuration()
		if t < 0 || t%time.Millisecond != 0 {
			return fmt.Errorf("%w: protocolDetectionTimeout %s: want 0 or a non-negative whole number of milliseconds", ErrBadMeshSetting, t)
		}
		m.ProtocolDetectionTimeout = t
	} else {
		m.ProtocolDetectionTimeout = 0
	}

	// The listener ports: injection's iptables rules and pilotfish's
	// listeners use Istio's; another value would leave traffic nowhere.
	if p := cfg.GetProxyListenPort(); p != meshProxyListenPort {
		return fmt.Errorf("%w: proxyListenPort %d is not supported (pilotfish's outbound listener is on %d)", ErrBadMeshSetting, p, meshProxyListenPort)
	}
	if p := cfg.GetProxyInboundListenPort(); p != meshProxyInboundListenPort {
		return fmt.Errorf("%w: proxyInboundListenPort %d is not supported (pilotfish's inbound listener is on %d)", ErrBadMeshSetting, p, meshProxyInboundListenPort)
	}
	if p := cfg.GetProxyHttpPort(); p != 0 {
		return fmt.Errorf("%w: proxyHttpPort %d is not supported (no HTTP proxy listener; leave it 0)", ErrBadMeshSetting, p)
	}
	// serviceEntryVisibility narrows ServiceEntries' exportTo for sidecars
	// only with applyToSidecars (else it is for ambient, which pilotfish
	// does not serve). Its policies are not implemented: refusing them
	// keeps entries from being visible wider than the mesh allows.
	if cfg.GetServiceEntryVisibility().GetApplyToSidecars() {
		return fmt.Errorf("%w: serviceEntryVisibility.applyToSidecars is not supported", ErrBadMeshSetting)
	}
	return nil
}

// meshExportTo checks a default exportTo list: "*", ".", "~" or namespace
// names. Unset stays nil ("*", istiod's default when the field is absent).
func meshExportTo(field string, in []string) ([]string, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]string, 0, len(in))
	for i, x := range in {
		if x != "*" && x != "." && x != "~" && !dnsLabel.MatchString(x) {
			return nil, fmt.Errorf("%w: %s[%d] %q: want \"*\", \".\", \"~\" or a namespace name", ErrBadMeshSetting, field, i, x)
		}
		out = append(out, x)
	}
	return out, nil
}

// meshRetry reads defaultHttpRetryPolicy (nil: istiod's built-in policy;
// attempts 0 turns retries off, as in a VirtualService).
func meshRetry(in *networking.HTTPRetry) (encode.HTTPRetry, error) {
	if in == nil {
		return encode.HTTPRetry{}, nil
	}
	out := encode.HTTPRetry{Set: true, Attempts: in.GetAttempts(), RetryOn: in.GetRetryOn()}
	if out.Attempts < 0 {
		return out, fmt.Errorf("%w: defaultHttpRetryPolicy.attempts %d: want 0 or more", ErrBadMeshSetting, out.Attempts)
	}
	for _, d := range []struct {
		field string
		in    interface {
			CheckValid() error
			AsDuration() time.Duration
		}
		set  bool
		val  *time.Duration
		flag *bool
	}{
		{"perTryTimeout", in.GetPerTryTimeout(), in.GetPerTryTimeout() != nil, &out.PerTryTimeout, &out.HasPerTryTimeout},
		{"backoff", in.GetBackoff(), in.GetBackoff() != nil, &out.Backoff, &out.HasBackoff},
	} {
		if !d.set {
			continue
		}
		if err := d.in.CheckValid(); err != nil {
			return out, fmt.Errorf("%w: defaultHttpRetryPolicy.%s: %v", ErrBadMeshSetting, d.field, err)
		}
		// istiod's VirtualService validation: at least a millisecond.
		if t := d.in.AsDuration(); t < time.Millisecond {
			return out, fmt.Errorf("%w: defaultHttpRetryPolicy.%s %s: want 1ms or more", ErrBadMeshSetting, d.field, t)
		}
		*d.val, *d.flag = d.in.AsDuration(), true
	}
	if v := in.GetRetryIgnorePreviousHosts(); v != nil {
		out.IgnorePreviousHosts, out.HasIgnorePreviousHosts = v.GetValue(), true
	}
	out.RetryRemoteLocalities = in.GetRetryRemoteLocalities().GetValue()
	return out, nil
}
