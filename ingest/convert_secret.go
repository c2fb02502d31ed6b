package ingest

import (
	"sort"

	"github.com/cespare/xxhash/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// credentialKeys are the Secret data keys gateway credentials are built
// from (istiod's names: kubernetes.io/tls secrets' tls.crt, tls.key, ca.crt
// and ca.crl, generic secrets' cert, key, cacert and crl). They are the
// keys encode.CredentialKeys serves (TestCredentialKeysAgree); every other
// key of a Secret is dropped before the index sees it.
var credentialKeys = []string{"tls.crt", "tls.key", "ca.crt", "ca.crl", "cert", "key", "cacert", "crl"}

// CredentialKeys returns the Secret data keys the index keeps.
func CredentialKeys() []string { return append([]string(nil), credentialKeys...) }

// dockerConfigKeys is what the index keeps of a kubernetes.io/dockerconfigjson
// Secret: its docker config, a WasmPlugin's image pull secret (served only
// to proxies with a verified identity; rules.WithPullSecrets).
var dockerConfigKeys = []string{corev1.DockerConfigJsonKey}

// credentialData returns s's credential keys (a dockerconfigjson Secret's:
// its docker config), stringData overriding data as the API server merges
// them; nil when s holds none (the index keeps no row for it).
func credentialData(s *corev1.Secret) map[string][]byte {
	var out map[string][]byte
	keys := credentialKeys
	if s.Type == corev1.SecretTypeDockerConfigJson {
		keys = dockerConfigKeys
	}
	for _, k := range keys {
		v, ok := s.Data[k]
		if sv, found := s.StringData[k]; found {
			v, ok = []byte(sv), true
		}
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string][]byte, 4)
		}
		out[k] = v
	}
	return out
}

// secret puts a Secret's credential keys as a ConfigSecret row. Its hash
// covers only what the row holds, so a change to another key of the Secret
// changes nothing downstream.
func (c *Converter) secret(b *index.Batch, o *Object) []rowRef {
	data := credentialData(o.Spec.(*corev1.Secret))
	if data == nil {
		return nil
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := xxhash.New()
	_, _ = d.WriteString(o.Meta.Namespace + "/" + o.Meta.Name + "\x00")
	for _, k := range keys {
		_, _ = d.WriteString(k + "\x00")
		_, _ = d.Write(data[k])
		_, _ = d.WriteString("\x00")
	}
	row := index.Config{
		Kind: index.ConfigSecret,
		Key:  index.ConfigKey{Namespace: c.sym(o.Meta.Namespace), Name: c.sym(o.Meta.Name)},
		Spec: data,
		Hash: d.Sum64(),
	}
	if o.Pos.File != "" {
		row.SourceFile, row.SourceLine = c.sym(o.Pos.File), int32(o.Pos.Line)
	}
	b.PutConfig(row)
	return c.oneRef(configRef(index.ConfigSecret, row.Key))
}

// secret checks what the API server checks of a Secret's keys: each is a
// valid ConfigMap key. Values are never quoted in a message.
func (v *validator) secret(s *corev1.Secret) {
	var root *fieldPath
	for _, k := range sortedMapKeys(s.Data) {
		if !validSecretKey(k) {
			v.errorf(root.f("data").k(k), "invalid key %q: must consist of alphanumeric characters, '-', '_' or '.'", k)
		}
	}
	for _, k := range sortedMapKeys(s.StringData) {
		if !validSecretKey(k) {
			v.errorf(root.f("stringData").k(k), "invalid key %q: must consist of alphanumeric characters, '-', '_' or '.'", k)
		}
	}
}

func validSecretKey(k string) bool {
	if k == "" || len(k) > 253 || k == "." || k == ".." {
		return false
	}
	for _, r := range k {
		if !(r == '-' || r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// transformSecret is the Secret informer's transform: the cache keeps a
// Secret's trimmed metadata, its type and its credential keys (or docker
// config) only, so no other secret material (and nothing of a Secret that
// holds none) stays in pilotfish's memory.
func transformSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	return &corev1.Secret{ObjectMeta: trimMeta(KindSecret, &s.ObjectMeta), Type: s.Type, Data: credentialData(s)}, nil
}
