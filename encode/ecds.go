package encode

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	netwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	extensions "istio.io/api/extensions/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// ExtensionConfigType is the type URL of ECDS resources.
const ExtensionConfigType = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"

// istiod names a WasmPlugin's extension config after the TrafficExtension
// it translates the plugin to: a prefix, NAMESPACE.NAME, and a marker no
// Kubernetes name can hold.
const (
	wasmResourcePrefix = "extensions.istio.io/trafficextension/"
	wasmNameMarker     = "~istio-translated-wasmplugin"
)

// The VM environment variables istio-agent reads (and strips) before it
// hands a Wasm config to Envoy.
const (
	WasmPullSecretEnv      = "ISTIO_META_WASM_IMAGE_PULL_SECRET"
	wasmPullPolicyEnv      = "ISTIO_META_WASM_IMAGE_PULL_POLICY"
	wasmResourceVersionEnv = "ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION"
)

// WasmResourceName is the ECDS resource name (and filter name) of the
// WasmPlugin namespace/name, as istiod names it.
func WasmResourceName(namespace, name string) string {
	return wasmResourcePrefix + namespace + "." + name + wasmNameMarker
}

// ParseWasmResourceName returns the namespace and name of a WasmPlugin's
// ECDS resource name; ok is false for any other name.
func ParseWasmResourceName(s string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(s, wasmResourcePrefix)
	if !found {
		return "", "", false
	}
	rest, found = strings.CutSuffix(rest, wasmNameMarker)
	if !found {
		return "", "", false
	}
	namespace, name, found = strings.Cut(rest, ".")
	return namespace, name, found && namespace != "" && name != ""
}

// ExtensionConfigKey holds every input of one WasmPlugin's extension
// config: the plugin's row, and what ISTIO_META_WASM_IMAGE_PULL_SECRET
// carries when the plugin names a pull secret (the Secret's docker config,
// for a proxy with a verified identity; "" otherwise, as istiod sends).
type ExtensionConfigKey struct {
	Plugin     *index.Config
	PullSecret string
}

// Hash feeds every field.
func (k *ExtensionConfigKey) Hash() uint64 {
	h := NewHasher("ExtensionConfigKey")
	clHashConfig(&h, k.Plugin)
	h.Str(k.PullSecret)
	return h.Sum()
}

// ExtensionConfigGen generates ExtensionConfigKey's extension config.
var ExtensionConfigGen = resourceGen(KindExtension, ExtensionConfigType, ExtensionConfig)

// ExtensionConfig is istiod's extension config for a WasmPlugin: an HTTP
// or network Wasm filter whose VM fetches the module from the plugin's
// url (istio-agent downloads it, checks sha256 and rewrites the source to
// a local file), with the plugin's configuration as a JSON string.
func ExtensionConfig(n index.Names, k *ExtensionConfigKey) (string, proto.Message) {
	wp, _ := k.Plugin.Spec.(*extensions.WasmPlugin)
	ns, name := n.String(k.Plugin.Key.Namespace), n.String(k.Plugin.Key.Name)
	cfg := &wasmv3.PluginConfig{
		Name:          ns + "." + name + wasmNameMarker,
		RootId:        wp.GetPluginName(),
		Configuration: wasmPluginConfiguration(wp),
		Vm:            &wasmv3.PluginConfig_VmConfig{VmConfig: wasmVM(wp, k)},
		FailurePolicy: wasmFailurePolicy(wp.GetFailStrategy()),
	}
	var typed proto.Message = &httpwasm.Wasm{Config: cfg}
	if wp.GetType() == extensions.PluginType_NETWORK {
		typed = &netwasm.Wasm{Config: cfg}
	}
	res := WasmResourceName(ns, name)
	return res, &core.TypedExtensionConfig{Name: res, TypedConfig: rtAny(typed)}
}

// wasmPluginConfiguration is pluginConfig as a JSON string (what proxy-wasm
// plugins read), or an empty Any without one, as istiod sends.
func wasmPluginConfiguration(wp *extensions.WasmPlugin) *anypb.Any {
	pc := wp.GetPluginConfig()
	if len(pc.GetFields()) == 0 {
		return &anypb.Any{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pc.AsMap()); err != nil {
		return &anypb.Any{} // a Struct always encodes; keep the filter rather than panic
	}
	return rtAny(wrapperspb.String(strings.TrimSuffix(b.String(), "\n")))
}

// wasmCodeTimeout is istiod's fixed fetch timeout of remote code.
var wasmCodeTimeout = durationpb.New(30 * time.Second)

// wasmVM is the plugin's VM: the V8 runtime, its code from url (an image
// reference without scheme is oci://; file:// is a local file), and its
// environment: the agent's pull secret, pull policy and resource version
// variables, the inline variables, and the host variables by name.
func wasmVM(wp *extensions.WasmPlugin, k *ExtensionConfigKey) *wasmv3.VmConfig {
	env := map[string]string{}
	if wp.GetImagePullSecret() != "" {
		env[WasmPullSecretEnv] = k.PullSecret
	}
	if p := wp.GetImagePullPolicy(); p != extensions.PullPolicy_UNSPECIFIED_POLICY {
		env[wasmPullPolicyEnv] = p.String()
	}
	// istiod sends the object's resourceVersion: istio-agent pulls an image
	// of policy Always again when it changes. The row's content hash
	// changes with every change of the plugin too.
	env[wasmResourceVersionEnv] = strconv.FormatUint(k.Plugin.Hash, 10)
	var host []string
	for _, e := range wp.GetVmConfig().GetEnv() {
		switch e.GetValueFrom() {
		case extensions.EnvValueSource_INLINE:
			env[e.GetName()] = e.GetValue()
		case extensions.EnvValueSource_HOST:
			host = append(host, e.GetName())
		}
	}
	return &wasmv3.VmConfig{
		Runtime:              "envoy.wasm.runtime.v8",
		Code:                 wasmCode(wp.GetUrl(), wp.GetSha256()),
		EnvironmentVariables: &wasmv3.EnvironmentVariables{KeyValues: env, HostEnvKeys: host},
	}
}

// wasmCode is the VM's code source: a local file for file://, else a
// remote source istio-agent fetches (cluster "_": Envoy never does).
func wasmCode(raw, sha string) *core.AsyncDataSource {
	u, err := url.Parse(raw)
	if err != nil {
		u = &url.URL{Path: raw} // validation refuses such a url; keep it as written
	}
	if u.Scheme == "file" {
		return &core.AsyncDataSource{Specifier: &core.AsyncDataSource_Local{Local: &core.DataSource{
			Specifier: &core.DataSource_Filename{Filename: strings.TrimPrefix(raw, "file://")},
		}}}
	}
	if u.Scheme == "" {
		u.Scheme = "oci"
	}
	return &core.AsyncDataSource{Specifier: &core.AsyncDataSource_Remote{Remote: &core.RemoteDataSource{
		HttpUri: &core.HttpUri{
			Uri:              u.String(),
			Timeout:          wasmCodeTimeout,
			HttpUpstreamType: &core.HttpUri_Cluster{Cluster: "_"},
		},
		Sha256: sha,
	}}}
}

func wasmFailurePolicy(s extensions.FailStrategy) wasmv3.FailurePolicy {
	switch s {
	case extensions.FailStrategy_FAIL_OPEN:
		return wasmv3.FailurePolicy_FAIL_OPEN
	case extensions.FailStrategy_FAIL_RELOAD:
		return wasmv3.FailurePolicy_FAIL_RELOAD
	}
	return wasmv3.FailurePolicy_FAIL_CLOSED
}
