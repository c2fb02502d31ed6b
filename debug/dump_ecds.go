package debug

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	netwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// wasmPullSecretEnv is the VM variable carrying a WasmPlugin's image pull
// secret; a config dump shows it redacted, as istiod does.
const wasmPullSecretEnv = "ISTIO_META_WASM_IMAGE_PULL_SECRET"

// pullSecretRedacted is istiod's placeholder for the pull secret.
const pullSecretRedacted = "<Redacted>"

// ecdsDump is the config dump's last section, istiod's EcdsConfigDump
// (pilot/pkg/xds/debug.go): one filter per ECDS resource the proxy
// subscribes to. As istiod, an HTTP Wasm filter shows as the Wasm message
// itself (not its TypedExtensionConfig) with the pull secret variable, if
// set, "<Redacted>"; other configs show as served. A network Wasm filter
// is redacted too (istiod shows it as served).
func ecdsDump(res []*anypb.Any, version string, at *timestamppb.Timestamp) (*adminv3.EcdsConfigDump, error) {
	out := &adminv3.EcdsConfigDump{}
	for _, a := range res {
		shown, err := ecdsShown(a)
		if err != nil {
			return nil, err
		}
		out.EcdsFilters = append(out.EcdsFilters, &adminv3.EcdsConfigDump_EcdsFilterConfig{VersionInfo: version, EcdsFilter: shown, LastUpdated: at})
	}
	return out, nil
}

func ecdsShown(a *anypb.Any) (*anypb.Any, error) {
	tec := &corev3.TypedExtensionConfig{}
	if err := a.UnmarshalTo(tec); err != nil {
		return nil, err
	}
	switch {
	case tec.GetTypedConfig().MessageIs((*httpwasm.Wasm)(nil)):
		w := &httpwasm.Wasm{}
		if err := tec.GetTypedConfig().UnmarshalTo(w); err != nil {
			return nil, err
		}
		redactPullSecret(w.GetConfig())
		return anypb.New(w)
	case tec.GetTypedConfig().MessageIs((*netwasm.Wasm)(nil)):
		w := &netwasm.Wasm{}
		if err := tec.GetTypedConfig().UnmarshalTo(w); err != nil {
			return nil, err
		}
		if !redactPullSecret(w.GetConfig()) {
			return a, nil
		}
		tc, err := anypb.New(w)
		if err != nil {
			return nil, err
		}
		tec.TypedConfig = tc
		return anypb.New(tec)
	}
	return a, nil
}

// redactPullSecret replaces a set pull secret variable; it reports whether
// it did.
func redactPullSecret(c *wasmv3.PluginConfig) bool {
	kv := c.GetVmConfig().GetEnvironmentVariables().GetKeyValues()
	if _, ok := kv[wasmPullSecretEnv]; !ok {
		return false
	}
	kv[wasmPullSecretEnv] = pullSecretRedacted
	return true
}
