package inject

import (
	"fmt"
	"slices"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Policy is the injector's default for pods that neither opt in nor out.
type Policy string

// The policies of istiod's injector config. Any other value injects
// nothing, as in istiod.
const (
	PolicyEnabled  Policy = "enabled"
	PolicyDisabled Policy = "disabled"
)

// Config is the `config` key of istiod's `istio-sidecar-injector`
// ConfigMap, parsed: the policy, the templates (compiled once) and the
// selectors. It is immutable once returned by ParseConfig.
type Config struct {
	Policy Policy
	// DefaultTemplates are rendered, in order, for a pod without
	// inject.istio.io/templates ([sidecar] when the config names none).
	DefaultTemplates []string
	// Aliases expand one template name to several (not recursively).
	Aliases map[string][]string
	// NeverInject and AlwaysInject decide for pods without an explicit
	// sidecar.istio.io/inject, never first; the first match wins.
	NeverInject  []labels.Selector
	AlwaysInject []labels.Selector
	// InjectedAnnotations are set on every injected pod.
	InjectedAnnotations map[string]string

	templates map[string]*template.Template
	names     []string // sorted template names, for error messages
	overlays  *overlayCache
}

// rawConfig is the ConfigMap key's shape (istiod's field names).
type rawConfig struct {
	Policy               Policy                 `json:"policy"`
	DefaultTemplates     []string               `json:"defaultTemplates"`
	Templates            map[string]string      `json:"templates"`
	Aliases              map[string][]string    `json:"aliases"`
	NeverInjectSelector  []metav1.LabelSelector `json:"neverInjectSelector"`
	AlwaysInjectSelector []metav1.LabelSelector `json:"alwaysInjectSelector"`
	InjectedAnnotations  map[string]string      `json:"injectedAnnotations"`
}

// ParseConfig parses the injector ConfigMap's `config` key (YAML). Every
// template is compiled with the function set istiod gives templates
// (funcs.go); a template that does not compile, or a selector that is not
// a valid label selector, fails the whole config, naming it, so that the
// last good config stays in force. Keys istiod no longer reads (the old
// single `template`) are ignored, as istiod ignores them.
func ParseConfig(data []byte) (*Config, error) {
	var raw rawConfig
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	c := &Config{
		Policy:              raw.Policy,
		DefaultTemplates:    raw.DefaultTemplates,
		Aliases:             raw.Aliases,
		InjectedAnnotations: raw.InjectedAnnotations,
		templates:           make(map[string]*template.Template, len(raw.Templates)),
		overlays:            &overlayCache{},
	}
	if len(c.DefaultTemplates) == 0 {
		c.DefaultTemplates = []string{"sidecar"}
	}
	for name, text := range raw.Templates {
		t, err := template.New(name).Funcs(templateFuncs).Parse(text)
		if err != nil {
			return nil, fmt.Errorf("%w: templates.%s: %v", ErrConfig, name, err)
		}
		c.templates[name] = t
		c.names = append(c.names, name)
	}
	slices.Sort(c.names)
	var err error
	if c.NeverInject, err = selectors("neverInjectSelector", raw.NeverInjectSelector); err != nil {
		return nil, err
	}
	if c.AlwaysInject, err = selectors("alwaysInjectSelector", raw.AlwaysInjectSelector); err != nil {
		return nil, err
	}
	return c, nil
}

// TemplateNames lists the config's templates, sorted.
func (c *Config) TemplateNames() []string { return slices.Clone(c.names) }

func selectors(field string, in []metav1.LabelSelector) ([]labels.Selector, error) {
	out := make([]labels.Selector, 0, len(in))
	for i := range in {
		s, err := metav1.LabelSelectorAsSelector(&in[i])
		if err != nil {
			return nil, fmt.Errorf("%w: %s[%d]: %v", ErrConfig, field, i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Values is the `values` key of the injector ConfigMap: the Helm values
// the templates read as .Values. Immutable once returned by ParseValues.
type Values struct {
	m map[string]any
}

// ParseValues parses the `values` key (JSON or YAML).
func ParseValues(data []byte) (*Values, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrValues, err)
	}
	return &Values{m: m}, nil
}

// lookup walks the values by keys; nil when any step is missing.
func (v *Values) lookup(keys ...string) any {
	var cur any = v.m
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// str is a value as text ("" when absent), numbers as fmt prints them.
func (v *Values) str(keys ...string) string {
	switch x := v.lookup(keys...).(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// flag is a boolean value (false when absent or not a boolean).
func (v *Values) flag(keys ...string) bool {
	b, _ := v.lookup(keys...).(bool)
	return b
}
