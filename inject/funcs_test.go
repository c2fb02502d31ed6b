package inject

import (
	"bytes"
	"testing"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshconfig "istio.io/api/mesh/v1alpha1"
)

// TestTemplateFuncsMatchIstiod pins the template function set: every
// sprig function and every name istiod adds, and nothing else (a
// template using a name istiod lacks would not work on istiod).
func TestTemplateFuncsMatchIstiod(t *testing.T) {
	want := map[string]bool{}
	for k := range sprig.TxtFuncMap() {
		want[k] = true
	}
	for _, k := range istiodFuncNames {
		want[k] = true
	}
	if len(istiodFuncNames) != 26 {
		t.Fatalf("%d istiod names, istiod's template.go has 26", len(istiodFuncNames))
	}
	for k := range want {
		if templateFuncs[k] == nil {
			t.Errorf("missing template function %q", k)
		}
	}
	for k := range templateFuncs {
		if !want[k] {
			t.Errorf("template function %q is neither sprig's nor istiod's", k)
		}
	}
}

// TestTemplateFuncs runs istiod's functions where they differ from
// sprig's or from the obvious, through a template as users call them.
func TestTemplateFuncs(t *testing.T) {
	meta := metav1.ObjectMeta{Annotations: map[string]string{"a": "x", "multus": `[{"name": "other"}]`}}
	for _, tc := range []struct{ tmpl, want string }{
		{`{{ contains "b" "abc" }}`, "true"},                    // flipped: needle first
		{`{{ "l1\nl2" | indent 2 }}`, "l1\n  l2"},               // first line not indented
		{`{{ excludeInboundPort 15020 "" }}`, "15020"},          // added
		{`{{ excludeInboundPort 15020 "1,15020" }}`, "1,15020"}, // already there
		{`{{ excludeInboundPort 0 "1" }}`, "1"},
		{`{{ annotation .M "a" "d" }}|{{ annotation .M "b" 7 }}`, "x|7"},
		{`{{ valueOrDefault "" "d" }}|{{ valueOrDefault "v" "d" }}`, "d|v"},
		{`{{ toJSON (strdict "k" "v" "odd") }}`, `{"k":"v","odd":""}`},
		{`{{ toJsonMap (strdict "a" "1") (strdict "a" "2" "b" "3") }}`, `{"a":"2","b":"3"}`},
		{`{{ omit (strdict "a" "1" "b" "2") "a" | toJSON }}`, `{"b":"2"}`},
		{`{{ appendMultusNetwork (index .M.Annotations "multus") "default/istio-cni" }}`, `[{"name": "other"}, {"name": "istio-cni", "namespace": "default"}]`},
		{`{{ appendMultusNetwork "a, default/istio-cni" "default/istio-cni" }}`, "a, default/istio-cni"},
		{`{{ directory "/etc/certs/ca.pem" }}`, "/etc/certs/"},
		{`{{ toYaml (omitNil (fromJSON "{\"a\":null,\"b\":{\"c\":null},\"d\":1}")) }}`, "d: 1\n"},
		{`{{ fromJSON "not json" }}`, "{}"},
		{`{{ isset .M.Annotations "a" }}{{ isset .M.Annotations "z" }}`, "truefalse"},
	} {
		tm, err := template.New("t").Funcs(templateFuncs).Parse(tc.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		var b bytes.Buffer
		if err := tm.Execute(&b, map[string]any{"M": meta}); err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		if got := b.String(); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.tmpl, got, tc.want)
		}
	}
	mc := &meshconfig.MeshConfig{ExtensionProviders: []*meshconfig.MeshConfig_ExtensionProvider{{Name: "otel",
		Provider: &meshconfig.MeshConfig_ExtensionProvider_Opentelemetry{Opentelemetry: &meshconfig.MeshConfig_ExtensionProvider_OpenTelemetryTracingProvider{
			ServiceAttributeEnrichment: meshconfig.MeshConfig_ExtensionProvider_OTEL_SEMANTIC_CONVENTIONS}}}}}
	cs := []corev1.Container{{Name: "app", Image: "reg:5000/app:1.2@sha256:ab"}}
	if got, want := otelResourceAttributes(mc, nil, nil, "shop", cs), "service.namespace=shop,service.version=1.2@sha256:ab,service.instance.id=shop.$(POD_NAME).app"; got != want {
		t.Errorf("otel attributes %q, want %q", got, want)
	}
	if got := otelResourceAttributes(&meshconfig.MeshConfig{}, nil, nil, "shop", cs); got != "" {
		t.Errorf("otel attributes without the provider: %q", got)
	}
}
