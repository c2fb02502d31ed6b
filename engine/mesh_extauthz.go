package engine

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// applyExtAuthzMesh copies the mesh config's extensionProviders of kinds
// envoyExtAuthzHttp and envoyExtAuthzGrpc into m.ExtAuthz (other kinds are
// telemetry's). As istiod, an invalid provider does not refuse the mesh
// config: it is kept with the reason in Err, and the AuthorizationPolicies
// naming it deny what they match (encode/authz_extauthz.go).
func applyExtAuthzMesh(m *encode.Mesh, cfg *meshv1alpha1.MeshConfig) {
	m.ExtAuthz = nil
	for i, ep := range cfg.GetExtensionProviders() {
		var p encode.ExtAuthzProvider
		var errs []error
		switch k := ep.GetProvider().(type) {
		case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExtAuthzHttp:
			p, errs = extAuthzHTTPProvider(k.EnvoyExtAuthzHttp)
		case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExtAuthzGrpc:
			p, errs = extAuthzGRPCProvider(k.EnvoyExtAuthzGrpc)
		default:
			continue
		}
		p.Name = ep.GetName()
		if err := extAuthzProviderName(p.Name); err != nil {
			errs = append([]error{fmt.Errorf("extensionProviders[%d]: %w", i, err)}, errs...)
		} else if slices.ContainsFunc(m.ExtAuthz, func(o encode.ExtAuthzProvider) bool { return o.Name == p.Name }) {
			errs = append([]error{fmt.Errorf("extensionProviders[%d]: duplicate name %q", i, p.Name)}, errs...)
		}
		if err := errors.Join(errs...); err != nil {
			p.Err = strings.ReplaceAll(err.Error(), "\n", "; ")
		}
		m.ExtAuthz = append(m.ExtAuthz, p)
	}
}

// extAuthzProviderName is istiod's rule for an ext_authz provider's name:
// a DNS-1123 label (it goes into metadata keys and policy names).
func extAuthzProviderName(name string) error {
	if name == "" || len(name) > 63 || !dnsLabel.MatchString(name) {
		return fmt.Errorf("provider name %q: want a lowercase DNS label of at most 63 characters", name)
	}
	return nil
}

func extAuthzCommon(service string, port uint32, status string) (encode.ExtAuthzProvider, []error) {
	p := encode.ExtAuthzProvider{Service: service, Port: port}
	var errs []error
	if service == "" {
		errs = append(errs, errors.New("service must not be empty"))
	}
	if port < 1 || port > 65535 {
		errs = append(errs, fmt.Errorf("port must be in [1, 65535], found %d", port))
	}
	if status != "" {
		code, err := strconv.ParseInt(status, 10, 32)
		if _, known := typev3.StatusCode_name[int32(code)]; err != nil || !known {
			errs = append(errs, fmt.Errorf("statusOnError %q: want an HTTP status code Envoy knows", status))
		} else {
			p.StatusOnError = uint32(code)
		}
	}
	return p, errs
}

func extAuthzHTTPProvider(c *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider) (encode.ExtAuthzProvider, []error) {
	p, errs := extAuthzCommon(c.GetService(), c.GetPort(), c.GetStatusOnError())
	p.Kind = encode.ExtAuthzHTTP
	p.Timeout, p.TimeoutSet, errs = extAuthzTimeout(c.GetTimeout(), errs)
	p.FailOpen = c.GetFailOpen()
	p.PathPrefix = c.GetPathPrefix()
	if p.PathPrefix != "" {
		if _, err := url.Parse(p.PathPrefix); err != nil || !strings.HasPrefix(p.PathPrefix, "/") {
			errs = append(errs, fmt.Errorf("pathPrefix %q: want a URL path beginning with /", p.PathPrefix))
		}
	}
	p.IncludeRequestHeaders = c.GetIncludeRequestHeadersInCheck()
	if len(p.IncludeRequestHeaders) == 0 {
		p.IncludeRequestHeaders = c.GetIncludeHeadersInCheck() //nolint:staticcheck // istiod reads the deprecated field when the new one is unset
	}
	p.HeadersToUpstreamOnAllow = c.GetHeadersToUpstreamOnAllow()
	p.HeadersToDownstreamOnDeny = c.GetHeadersToDownstreamOnDeny()
	p.HeadersToDownstreamOnAllow = c.GetHeadersToDownstreamOnAllow()
	for field, l := range map[string][]string{
		"includeRequestHeadersInCheck": c.GetIncludeRequestHeadersInCheck(),
		"includeHeadersInCheck":        c.GetIncludeHeadersInCheck(), //nolint:staticcheck // validated as istiod does
		"headersToUpstreamOnAllow":     p.HeadersToUpstreamOnAllow,
		"headersToDownstreamOnDeny":    p.HeadersToDownstreamOnDeny,
		"headersToDownstreamOnAllow":   p.HeadersToDownstreamOnAllow,
	} {
		if slices.Contains(l, "*") {
			errs = append(errs, fmt.Errorf("%s: a single wildcard \"*\" is not supported, use a prefix or suffix match", field))
		}
	}
	p.IncludeRequestHeaders = slices.Clone(p.IncludeRequestHeaders)
	for k, v := range c.GetIncludeAdditionalHeadersInCheck() {
		p.AdditionalHeaders = append(p.AdditionalHeaders, encode.ExtAuthzHeader{Key: k, Value: v})
	}
	slices.SortFunc(p.AdditionalHeaders, func(a, b encode.ExtAuthzHeader) int { return strings.Compare(a.Key, b.Key) })
	p.Body = extAuthzBody(c.GetIncludeRequestBodyInCheck())
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return p, errs
}

func extAuthzGRPCProvider(c *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationGrpcProvider) (encode.ExtAuthzProvider, []error) {
	p, errs := extAuthzCommon(c.GetService(), c.GetPort(), c.GetStatusOnError())
	p.Kind = encode.ExtAuthzGRPC
	p.Timeout, p.TimeoutSet, errs = extAuthzTimeout(c.GetTimeout(), errs)
	p.FailOpen = c.GetFailOpen()
	p.Body = extAuthzBody(c.GetIncludeRequestBodyInCheck())
	return p, errs
}

// extAuthzTimeout reads a provider's timeout. A negative one, which Envoy
// would refuse with the whole listener, makes the provider unusable instead
// (istiod passes it on).
func extAuthzTimeout(t *durationpb.Duration, errs []error) (time.Duration, bool, []error) {
	if t == nil {
		return 0, false, errs
	}
	if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
		return 0, false, append(errs, fmt.Errorf("timeout %s: want a duration of at least 0s", t.AsDuration()))
	}
	return t.AsDuration(), true, errs
}

func extAuthzBody(b *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationRequestBody) *encode.ExtAuthzBody {
	if b == nil {
		return nil
	}
	return &encode.ExtAuthzBody{MaxRequestBytes: b.GetMaxRequestBytes(), AllowPartialMessage: b.GetAllowPartialMessage(), PackAsBytes: b.GetPackAsBytes()}
}

// touchesExtAuthz reports whether the changes hold the service of one of
// mesh's ext_authz providers. A workload's CUSTOM filters depend on that
// service existing whatever the workload's scope sees (istiod looks it up in
// the whole registry), so such a change cannot be scoped.
func (s *scopedChanges) touchesExtAuthz(snap *index.Snapshot, mesh *encode.Mesh) bool {
	if s == nil || len(mesh.ExtAuthz) == 0 {
		return false
	}
	for _, p := range mesh.ExtAuthz {
		host := p.Service
		if _, h, ok := strings.Cut(host, "/"); ok {
			host = h
		}
		sym, ok := snap.Symbols.Lookup(host)
		if !ok {
			continue
		}
		for k := range s.services {
			if k.Host == sym {
				return true
			}
		}
	}
	return false
}
