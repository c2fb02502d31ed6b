package ingest

import (
	"net/url"

	extensions "istio.io/api/extensions/v1alpha1"
)

// WasmPlugin validation follows istiod's (ValidateWasmPlugin): one of
// selector, targetRef and targetRefs; a url of scheme file, http, https or
// oci (none: an OCI image reference); a sha256 of 64 lower-case hex
// digits; bounded imagePullSecret and pluginName lengths; VM env entries
// named, unique, with a value only when inline; match ports in range.

// Lengths istiod bounds.
const (
	maxWasmPullSecretLen = 253
	maxWasmPluginNameLen = 256
	maxWasmEnvNameLen    = 256
)

// wasmURLSchemes are the url schemes istiod accepts ("" is an image
// reference, pulled as oci://).
var wasmURLSchemes = map[string]bool{"": true, "file": true, "http": true, "https": true, "oci": true}

func (v *validator) wasmPlugin(p *fieldPath, wp *extensions.WasmPlugin) {
	v.policyTarget(p, wp.GetSelector(), wp.GetTargetRef(), wp.GetTargetRefs()) // validate_security.go
	v.wasmURL(p.f("url"), wp.GetUrl())
	if sha := wp.GetSha256(); sha != "" && !isSHA256Hex(sha) {
		v.errorf(p.f("sha256"), "must be 64 lower-case hexadecimal digits ([a-f0-9]{64})")
	}
	if n := len(wp.GetImagePullSecret()); n > maxWasmPullSecretLen {
		v.errorf(p.f("imagePullSecret"), "%d characters; at most %d", n, maxWasmPullSecretLen)
	}
	if n := len(wp.GetPluginName()); n > maxWasmPluginNameLen {
		v.errorf(p.f("pluginName"), "%d characters; at most %d", n, maxWasmPluginNameLen)
	}
	seen := map[string]bool{}
	for i, e := range wp.GetVmConfig().GetEnv() {
		ep := p.f("vmConfig").f("env").i(i)
		if e == nil {
			continue
		}
		switch {
		case e.GetName() == "":
			v.errorf(ep.f("name"), "required")
		case len(e.GetName()) > maxWasmEnvNameLen:
			v.errorf(ep.f("name"), "%d characters; at most %d", len(e.GetName()), maxWasmEnvNameLen)
		case seen[e.GetName()]:
			v.errorf(ep.f("name"), "duplicate environment variable %q", e.GetName())
		}
		seen[e.GetName()] = true
		if e.GetValueFrom() != extensions.EnvValueSource_INLINE && e.GetValue() != "" {
			v.errorf(ep.f("value"), "may be set only when valueFrom is INLINE")
		}
	}
	for i, m := range wp.GetMatch() {
		mp := p.f("match").i(i)
		if m == nil {
			v.errorf(mp, "must not be null")
			continue
		}
		for j, port := range m.GetPorts() {
			if port == nil {
				v.errorf(mp.f("ports").i(j), "must not be null")
				continue
			}
			if n := port.GetNumber(); n == 0 || n > 65535 {
				v.errorf(mp.f("ports").i(j).f("number"), "%d is out of range 1-65535", n)
			}
		}
	}
}

// wasmURL checks a plugin's url as istiod does: required, parsed as a
// request URI (or, failing that, as one once "http://" is put in front,
// for an image reference such as ghcr.io/org/plugin:v1), of a known scheme.
func (v *validator) wasmURL(p *fieldPath, s string) {
	if s == "" {
		v.errorf(p, "required")
		return
	}
	u, err := url.ParseRequestURI(s)
	if err != nil {
		u2, err2 := url.ParseRequestURI("http://" + s)
		if err2 != nil {
			v.errorf(p, "not a URL: %v", err)
			return
		}
		u = u2
	}
	if !wasmURLSchemes[u.Scheme] {
		v.errorf(p, "scheme %q is not supported; want oci, http, https or file (none: an OCI image)", u.Scheme)
	}
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'f' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}
