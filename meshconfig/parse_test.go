package meshconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	meshv1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/meshconfig"
)

// TestParseDefaults: an empty document (and a document of nulls) is
// istiod's defaults.
func TestParseDefaults(t *testing.T) {
	for _, in := range []string{"", "\n", "# comment only\n", "null\n"} {
		mc, warns, err := meshconfig.Parse([]byte(in))
		if err != nil || len(warns) > 0 {
			t.Fatalf("%q: %v %v", in, warns, err)
		}
		if !proto.Equal(mc, meshconfig.Defaults()) {
			t.Errorf("%q: not the defaults", in)
		}
	}
}

// TestParseMerge checks istiod's merge rules: fields replace the
// defaults', defaultConfig merges field by field (proxyMetadata by key),
// extensionProviders replace by name, trustDomainAliases join.
func TestParseMerge(t *testing.T) {
	mc, warns, err := meshconfig.Parse([]byte(`
rootNamespace: mesh-root
connectTimeout: 3s
outboundTrafficPolicy:
  mode: REGISTRY_ONLY
trustDomainAliases: [b.example, a.example]
defaultConfig:
  proxyMetadata:
    FOO: bar
  statusPort: 15021
extensionProviders:
- name: envoy
  envoyFileAccessLog:
    path: /dev/stderr
- name: otel
  opentelemetry:
    service: otel.example.svc.cluster.local
    port: 4317
`))
	if err != nil || len(warns) > 0 {
		t.Fatal(warns, err)
	}
	if mc.RootNamespace != "mesh-root" || mc.ConnectTimeout.AsDuration() != 3*time.Second ||
		mc.OutboundTrafficPolicy.Mode != meshv1.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY {
		t.Errorf("fields not applied: %v", mc)
	}
	if got := strings.Join(mc.TrustDomainAliases, ","); got != "a.example,b.example" {
		t.Errorf("aliases %s", got)
	}
	pc := mc.DefaultConfig
	if pc.StatusPort != 15021 || pc.ProxyMetadata["FOO"] != "bar" || pc.DiscoveryAddress != "istiod.istio-system.svc:15012" ||
		pc.DrainDuration.AsDuration() != 45*time.Second {
		t.Errorf("defaultConfig not merged over the defaults: %v", pc)
	}
	if n := len(mc.ExtensionProviders); n != 4 {
		t.Fatalf("%d providers, want 4 (3 defaults, envoy replaced, otel added)", n)
	}
	if p := mc.ExtensionProviders[2].GetEnvoyFileAccessLog().GetPath(); p != "/dev/stderr" {
		t.Errorf("envoy provider not replaced: %q", p)
	}
	if mc.EnableAutoMtls.GetValue() != true || mc.ProxyListenPort != 15001 {
		t.Error("defaults lost")
	}
}

// TestParseErrors: a bad value is refused with its field and line; an
// unknown field is a warning with its path and line, and the rest applies.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, in, field string
		line            int
	}{
		{"type", "rootNamespace: ok\nconnectTimeout: notaduration\n", "connectTimeout", 2},
		{"proxy config type", "defaultConfig:\n  statusPort: nope\n", "defaultConfig.statusPort", 2},
		{"range", "\nproxyListenPort: 70000\n", "proxyListenPort", 2},
		{"connect timeout", "connectTimeout: 2h\n", "connectTimeout", 1},
		{"trust domain", "trustDomain: Not_Valid\n", "trustDomain", 1},
		{"alias", "trustDomainAliases:\n- ok.example\n- bad_one\n", "trustDomainAliases[0]", 3},
		{"drain", "defaultConfig:\n  drainDuration: 1500ms\n", "defaultConfig.drainDuration", 2},
		{"discovery address", "defaultConfig:\n  discoveryAddress: nohostport\n", "defaultConfig.discoveryAddress", 2},
		{"selector", "discoverySelectors:\n- matchLabels:\n    'bad key!': x\n", "discoverySelectors[0]", 2},
		{"selector op", "discoverySelectors:\n- matchExpressions:\n  - key: a\n    operator: Sometimes\n", "discoverySelectors[0]", 2},
		{"locality", "localityLbSetting:\n  failover:\n  - from: us\n    to: us\n", "localityLbSetting.failover[0]", 3},
		{"service settings", "serviceSettings:\n- hosts: ['a..b']\n", "serviceSettings[0].hosts[0]", 2},
		{"not a map", "- a\n- b\n", "", 1},
		{"yaml", "a: [\n", "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := meshconfig.Parse([]byte(c.in))
			if !errors.Is(err, meshconfig.ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
			ps := meshconfig.Problems(err)
			if len(ps) == 0 {
				t.Fatalf("no problems in %v", err)
			}
			if c.field == "" {
				return
			}
			// The alias case: the sorted aliases put bad_one first.
			if ps[0].Field != c.field || ps[0].Line != c.line {
				t.Errorf("%v: field %q line %d, want %q line %d", err, ps[0].Field, ps[0].Line, c.field, c.line)
			}
		})
	}
}

func TestParseUnknownFields(t *testing.T) {
	mc, warns, err := meshconfig.Parse([]byte(`rootNamespace: r
enableTypo: true
defaultConfig:
  proxyMetadata: {A: b}
  notAField: 1
extensionProviders:
- name: x
  zipkin: {service: z.example, port: 9411, bogus: 1}
localityLbSetting:
  enabled: true
`))
	if err != nil {
		t.Fatal(err)
	}
	if mc.RootNamespace != "r" {
		t.Error("known fields not applied")
	}
	var got []string
	for _, w := range warns {
		if !errors.Is(w, meshconfig.ErrUnknownField) {
			t.Errorf("%v is not ErrUnknownField", w)
		}
		got = append(got, w.Field+"@"+itoa(w.Line))
	}
	want := "enableTypo@2 defaultConfig.notAField@5 extensionProviders[0].zipkin.bogus@8"
	if strings.Join(got, " ") != want {
		t.Errorf("warnings %v, want %s", got, want)
	}
}

func itoa(n int) string { return fmtInt(n) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestParseNetworks(t *testing.T) {
	n, err := meshconfig.ParseNetworks([]byte("networks: {}\n"))
	if err != nil || len(n.Networks) != 0 {
		t.Fatal(n, err)
	}
	_, err = meshconfig.ParseNetworks([]byte(`networks:
  net1:
    endpoints: [{fromRegistry: Kubernetes}]
    gateways: [{address: 1.2.3.4, port: 15443}]
`))
	if !errors.Is(err, meshconfig.ErrNetworksUnsupported) || !strings.Contains(err.Error(), "net1") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("err %v", err)
	}
	if _, err := meshconfig.ParseNetworks([]byte("networks: 3\n")); !errors.Is(err, meshconfig.ErrInvalid) {
		t.Errorf("err %v", err)
	}
}

func TestDiscoverySelectors(t *testing.T) {
	mc, _, err := meshconfig.Parse([]byte(`discoverySelectors:
- matchLabels: {team: a}
- matchExpressions: [{key: env, operator: In, values: [prod]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	ls := meshconfig.DiscoverySelectors(mc)
	if len(ls) != 2 || ls[0].MatchLabels["team"] != "a" || ls[1].MatchExpressions[0].Values[0] != "prod" {
		t.Errorf("%v", ls)
	}
	if meshconfig.DiscoverySelectors(meshconfig.Defaults()) != nil {
		t.Error("defaults have selectors")
	}
}
