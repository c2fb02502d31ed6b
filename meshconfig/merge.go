package meshconfig

import (
	"slices"
	"strings"

	"github.com/golang/protobuf/jsonpb" //nolint:staticcheck // istiod's exact merge semantics (a field present replaces, one absent is kept)
	protov1 "github.com/golang/protobuf/proto"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	meshv1 "istio.io/api/mesh/v1alpha1"
)

// apply is istiod's ApplyMeshConfig over Defaults without validation: the
// user's fields replace the defaults', except the merged ones (see the
// package doc). js is the document as JSON; raw its top-level keys.
func apply(js []byte, raw map[string]any) (*meshv1.MeshConfig, error) {
	mc := Defaults()
	prevPC, prevDP, prevEP, prevAliases := mc.DefaultConfig, mc.DefaultProviders, mc.ExtensionProviders, mc.TrustDomainAliases
	mc.DefaultConfig = DefaultProxyConfig()
	if err := applyJSON(js, mc); err != nil {
		return nil, err
	}
	mc.DefaultConfig = prevPC
	if pc, ok := raw["defaultConfig"]; ok && pc != nil {
		b, _ := yaml.Marshal(pc)
		merged, err := MergeProxyConfig(prevPC, b)
		if err != nil {
			return nil, err
		}
		mc.DefaultConfig = merged
	}
	fresh := mc.DefaultProviders
	mc.DefaultProviders = prevDP
	if dp, ok := raw["defaultProviders"]; ok && dp != nil {
		mc.DefaultProviders = fresh
	}
	added := mc.ExtensionProviders
	mc.ExtensionProviders = prevEP
	for _, p := range added {
		i := slices.IndexFunc(mc.ExtensionProviders, func(e *meshv1.MeshConfig_ExtensionProvider) bool { return e.Name == p.Name })
		if i >= 0 {
			mc.ExtensionProviders[i].Provider = p.Provider
		} else {
			mc.ExtensionProviders = append(mc.ExtensionProviders, p)
		}
	}
	aliases := append(slices.Clone(mc.TrustDomainAliases), prevAliases...)
	slices.Sort(aliases)
	mc.TrustDomainAliases = slices.Compact(aliases)
	return mc, nil
}

// MergeProxyConfig returns base with the proxy config in data (YAML or
// JSON) applied over it, as istiod applies meshConfig.defaultConfig and
// proxy.istio.io/config: each field given replaces base's, but
// proxyMetadata is merged key by key and proxyHeaders keeps base's
// headers the new value leaves unset. base is not modified.
func MergeProxyConfig(base *meshv1.ProxyConfig, data []byte) (*meshv1.ProxyConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	pc := proto.Clone(base).(*meshv1.ProxyConfig)
	if err := applyJSON(js, pc); err != nil {
		return nil, err
	}
	if len(base.GetProxyMetadata()) > 0 {
		md := make(map[string]string, len(base.ProxyMetadata)+len(pc.ProxyMetadata))
		for k, v := range base.ProxyMetadata {
			md[k] = v
		}
		for k, v := range pc.ProxyMetadata { // base's own (cloned) or the new value's
			md[k] = v
		}
		pc.ProxyMetadata = md
	}
	if ph, old := pc.ProxyHeaders, base.GetProxyHeaders(); ph != nil && old != nil {
		ph.ForwardedClientCert = firstSet(ph.ForwardedClientCert, old.ForwardedClientCert)
		ph.RequestId = firstSet(ph.RequestId, old.RequestId)
		ph.AttemptCount = firstSet(ph.AttemptCount, old.AttemptCount)
		ph.Server = firstSet(ph.Server, old.Server)
		ph.EnvoyDebugHeaders = firstSet(ph.EnvoyDebugHeaders, old.EnvoyDebugHeaders)
	}
	return pc, nil
}

func firstSet[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// applyJSON sets the fields present in js on m (golang/protobuf's jsonpb,
// as istiod's protomarshal.ApplyJSON: a field present replaces m's, one
// absent is left alone), ignoring unknown fields as istiod's second
// attempt does; unknownFields reports them.
func applyJSON(js []byte, m proto.Message) error {
	u := jsonpb.Unmarshaler{AllowUnknownFields: true}
	return u.Unmarshal(strings.NewReader(string(js)), protov1.MessageV1(m))
}
