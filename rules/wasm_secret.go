package rules

import (
	"strings"

	extensions "istio.io/api/extensions/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// DockerConfigKey is the data key of a kubernetes.io/dockerconfigjson
// Secret: the only key of such a Secret the index keeps (ingest).
const DockerConfigKey = ".dockerconfigjson"

// kubernetesSecretPrefix is the resource name form istiod accepts for a
// pull secret (kubernetes://NAME or kubernetes://NS/NAME).
const kubernetesSecretPrefix = "kubernetes://"

// WithPullSecrets gives a proxy with a verified identity its WasmPlugins'
// image pull secrets: each ECDS resource of res whose plugin names a pull
// secret is replaced, in place, by the variant whose
// ISTIO_META_WASM_IMAGE_PULL_SECRET holds the Secret's docker config, as
// istiod sends an authenticated proxy (pilot/pkg/xds/ecds.go). The Secret
// is read from the plugin's namespace whatever the name says (istiod
// forces it there). A plugin without a pull secret, or whose Secret is
// missing or holds no docker config, keeps the shared resource (its
// variable empty, as istiod sends then). res is a connection's own copy.
func WithPullSecrets(sc *Scope, cache *encode.Cache, res []Resource) error {
	snap := sc.Snapshot
	if snap.NumConfigs(index.ConfigWasmPlugin) == 0 || snap.NumConfigs(index.ConfigSecret) == 0 {
		return nil
	}
	var one [1]Resource
	for i := range res {
		c, cred := pluginPullSecret(snap, res[i].Name)
		if cred == "" {
			continue
		}
		out, err := appendResource(one[:0], cache, snap.Names(), &encode.ExtensionConfigKey{Plugin: c, PullSecret: cred}, encode.ExtensionConfigGen)
		if err != nil {
			return err
		}
		res[i] = out[0]
	}
	return nil
}

// pluginPullSecret is the plugin an ECDS name refers to and the docker
// config of the Secret it names ("" when it names none or the Secret has
// none).
func pluginPullSecret(snap *index.Snapshot, resName string) (*index.Config, string) {
	ns, name, ok := encode.ParseWasmResourceName(resName)
	if !ok {
		return nil, ""
	}
	nsSym, ok1 := snap.Symbols.Lookup(ns)
	nameSym, ok2 := snap.Symbols.Lookup(name)
	if !ok1 || !ok2 {
		return nil, ""
	}
	c, found := snap.Config(index.ConfigWasmPlugin, index.ConfigKey{Namespace: nsSym, Name: nameSym})
	if !found {
		return nil, ""
	}
	wp, _ := c.Spec.(*extensions.WasmPlugin)
	secret, ok := PullSecretName(wp.GetImagePullSecret())
	if !ok {
		return nil, ""
	}
	secSym, ok := snap.Symbols.Lookup(secret)
	if !ok {
		return nil, ""
	}
	s, found := snap.Config(index.ConfigSecret, index.ConfigKey{Namespace: c.Key.Namespace, Name: secSym})
	if !found {
		return nil, ""
	}
	data, _ := s.Spec.(map[string][]byte)
	return c, string(data[DockerConfigKey])
}

// PullSecretName is the Secret name a WasmPlugin's imagePullSecret names,
// read as istiod reads it: NAME, kubernetes://NAME or kubernetes://NS/NAME,
// anything past a second "/" ignored (the namespace is the plugin's
// whatever NS says, as istiod rewrites it). ok is false for an empty name.
func PullSecretName(s string) (string, bool) {
	parts := strings.Split(strings.TrimPrefix(s, kubernetesSecretPrefix), "/")
	name := parts[0]
	if len(parts) > 1 {
		name = parts[1]
	}
	return name, name != ""
}

// WasmPullSecretRefs calls fn with the namespace and Secret name of every
// WasmPlugin's pull secret in snap (a Secret change pushes ECDS only when
// one of them changed).
func WasmPullSecretRefs(snap *index.Snapshot, fn func(ns index.Sym, name string)) {
	if snap.NumConfigs(index.ConfigWasmPlugin) == 0 {
		return
	}
	snap.Configs(index.ConfigWasmPlugin, func(c *index.Config) bool {
		wp, _ := c.Spec.(*extensions.WasmPlugin)
		if name, ok := PullSecretName(wp.GetImagePullSecret()); ok {
			fn(c.Key.Namespace, name)
		}
		return true
	})
}
