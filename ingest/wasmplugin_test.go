package ingest_test

import (
	"testing"

	extensions "istio.io/api/extensions/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// wasmFull is a WasmPlugin with every field istiod reads.
const wasmFull = `selector: {matchLabels: {app: reviews}}
url: https://example.com/filters/authn.wasm
sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
phase: AUTHN
priority: 10
pluginName: authn_root
failStrategy: FAIL_OPEN
imagePullPolicy: Always
imagePullSecret: wasm-pull
type: HTTP
pluginConfig: {header: x-auth, limit: 3, nested: {keys: [1, two]}}
vmConfig: {env: [{name: MODE, value: strict}, {name: POD_NAME, valueFrom: HOST}]}
match: [{mode: SERVER, ports: [{number: 9080}]}]
`

func wp(spec string) string { return doc("WasmPlugin", "p", spec) }

// TestValidateWasmPlugin checks istiod's WasmPlugin rules
// (ValidateWasmPlugin), each error naming its field.
func TestValidateWasmPlugin(t *testing.T) {
	runRules(t, []ruleCase{
		{"every field ok", wp(wasmFull), ""},
		{"image reference without scheme ok", wp("url: ghcr.io/example/plugin:v1"), ""},
		{"oci ok", wp("url: oci://ghcr.io/example/plugin:v1"), ""},
		{"file ok", wp("url: file:///opt/plugin.wasm"), ""},
		{"targetRefs ok", wp("url: oci://x/y\ntargetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]"), ""},
		{"url required", wp("phase: AUTHN"), "spec.url: required"},
		{"url scheme", wp("url: ftp://example.com/p.wasm"), `spec.url: scheme "ftp" is not supported`},
		{"sha256 length", wp("url: oci://x/y\nsha256: abc"), "spec.sha256: must be 64 lower-case hexadecimal digits"},
		{"sha256 upper case", wp("url: oci://x/y\nsha256: 0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"), "spec.sha256: must be 64"},
		{"selector and targetRefs", wp("url: oci://x/y\nselector: {matchLabels: {app: a}}\ntargetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]"),
			"set only one of selector, targetRef and targetRefs"},
		{"targetRef kind", wp("url: oci://x/y\ntargetRef: {kind: Deployment, name: d}"), "spec.targetRef.kind: cannot target /Deployment"},
		{"selector wildcard", wp("url: oci://x/y\nselector: {matchLabels: {app: '*'}}"), "spec.selector.matchLabels[app]: wildcard"},
		{"env name required", wp("url: oci://x/y\nvmConfig: {env: [{value: v}]}"), "spec.vmConfig.env[0].name: required"},
		{"env duplicate", wp("url: oci://x/y\nvmConfig: {env: [{name: A}, {name: A}]}"), `spec.vmConfig.env[1].name: duplicate environment variable "A"`},
		{"env host value", wp("url: oci://x/y\nvmConfig: {env: [{name: A, valueFrom: HOST, value: v}]}"), "spec.vmConfig.env[0].value: may be set only when valueFrom is INLINE"},
		{"match port range", wp("url: oci://x/y\nmatch: [{ports: [{number: 70000}]}]"), "spec.match[0].ports[0].number: 70000 is out of range"},
		{"match port zero", wp("url: oci://x/y\nmatch: [{mode: CLIENT, ports: [{}]}]"), "spec.match[0].ports[0].number: 0 is out of range"},
	})
}

// FuzzWasmPlugin: decoding and validating any WasmPlugin spec returns
// errors (never panics), each a positioned ingest error.
func FuzzWasmPlugin(f *testing.F) {
	f.Add(wasmFull)
	f.Add("url: '%zz'\nmatch: [null]\nvmConfig: {env: [null, {name: ''}]}")
	f.Add("url: oci://x/y\ntargetRef: {group: core, kind: Service, name: s, namespace: other}")
	f.Fuzz(func(t *testing.T, spec string) {
		objs, errs := ingest.Decode("f.yaml", []byte(wp(spec)))
		for _, e := range errs {
			asError(t, e)
		}
		for i := range objs {
			for _, e := range ingest.Validate(&objs[i]) {
				asError(t, e)
			}
			for _, e := range ingest.Unsupported(&objs[i]) {
				asError(t, e)
			}
			_ = objs[i].Spec.(*extensions.WasmPlugin).GetUrl()
		}
	})
}
