package ingest_test

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

func tel(spec string) string {
	return "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t, namespace: shop}\nspec:\n  " +
		indentSpec(spec)
}

// indentSpec indents every line of spec after the first by two spaces.
func indentSpec(spec string) string {
	out := []byte{}
	for i := 0; i < len(spec); i++ {
		out = append(out, spec[i])
		if spec[i] == '\n' {
			out = append(out, ' ', ' ')
		}
	}
	return string(out) + "\n"
}

// TestValidateTelemetry: istiod's ValidateTelemetry rules, with field paths.
func TestValidateTelemetry(t *testing.T) {
	runRules(t, []ruleCase{
		{"access log ok", tel("accessLogging: [{providers: [{name: envoy}], filter: {expression: \"response.code >= 400 && request.headers['x'] == ')'\"}}]"), ""},
		{"metrics ok", tel("metrics: [{overrides: [{match: {metric: REQUEST_COUNT, mode: CLIENT}, tagOverrides: {a: {value: b}, c: {operation: REMOVE}}}]}]"), ""},
		{"provider name", tel("accessLogging: [{providers: [{}]}]"), "spec.accessLogging[0].providers[0].name: required"},
		{"CEL unbalanced", tel("accessLogging: [{filter: {expression: \"size(x\"}}]"), "spec.accessLogging[0].filter.expression: must be a valid CEL expression"},
		{"CEL empty", tel("accessLogging: [{filter: {expression: \"\"}}]"), "spec.accessLogging[0].filter.expression: must be a valid CEL expression"},
		{"upsert needs value", tel("metrics: [{overrides: [{tagOverrides: {a: {operation: UPSERT}}}]}]"), "spec.metrics[0].overrides[0].tagOverrides.a.value: required when operation is UPSERT"},
		{"remove has no value", tel("metrics: [{overrides: [{tagOverrides: {a: {operation: REMOVE, value: x}}}]}]"), "spec.metrics[0].overrides[0].tagOverrides.a.value: may only be set when operation is UPSERT"},
		{"sampling range", tel("tracing: [{randomSamplingPercentage: 101}]"), "spec.tracing[0].randomSamplingPercentage: must be in range [0.0, 100.0]"},
		{"selector or targetRefs", tel("selector: {matchLabels: {app: a}}\ntargetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: a}]"), "spec: set only one of selector, targetRef and targetRefs"},
		{"selector labels", tel("selector: {matchLabels: {app: 'a*'}}"), "spec.selector.matchLabels[app]: wildcard is not supported in a selector"},
	})
}

// FuzzTelemetry: any Telemetry spec decodes and validates without a panic.
func FuzzTelemetry(f *testing.F) {
	f.Add("accessLogging: [{filter: {expression: \"a('(' == x[0]\"}}]")
	f.Add("metrics: [{overrides: [{match: {customMetric: ''}, tagOverrides: {'': {}}}]}]")
	f.Add("tracing: [{customTags: {a: {}}}]")
	f.Fuzz(func(t *testing.T, spec string) {
		objs, errs := ingest.Decode("t.yaml", []byte(tel(spec)))
		_ = errs
		for i := range objs {
			_ = ingest.Validate(&objs[i])
		}
	})
}
