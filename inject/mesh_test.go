package inject_test

import (
	"errors"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// TestParseMesh checks istiod's merge rules for a mesh config file:
// fields replace the defaults, defaultConfig merges into the default
// proxy config (proxyMetadata key by key), extension providers replace
// the default ones of the same name.
func TestParseMesh(t *testing.T) {
	mc, err := inject.ParseMesh([]byte(`
trustDomain: example.org
defaultConfig:
  discoveryAddress: pilotfish.mesh:15012
  proxyMetadata: {A: "1"}
extensionProviders:
- name: envoy
  envoyFileAccessLog: {path: /dev/stderr}
- name: zipkin
  zipkin: {service: zipkin.tracing, port: 9411}
unknownField: ignored
`))
	if err != nil {
		t.Fatal(err)
	}
	pc := mc.GetDefaultConfig()
	if mc.TrustDomain != "example.org" || mc.ProxyListenPort != 15001 || pc.DiscoveryAddress != "pilotfish.mesh:15012" ||
		pc.StatusPort != 15020 || pc.ProxyMetadata["A"] != "1" || pc.GetDrainDuration().AsDuration().Seconds() != 45 {
		t.Fatalf("mesh %v", mc)
	}
	var names []string
	for _, p := range mc.ExtensionProviders {
		names = append(names, p.Name)
	}
	if len(names) != 4 || names[2] != "envoy" || mc.ExtensionProviders[2].GetEnvoyFileAccessLog().GetPath() != "/dev/stderr" || names[3] != "zipkin" {
		t.Fatalf("extension providers %v", names)
	}
	if _, err := inject.ParseMesh([]byte("proxyListenPort: notanumber")); !errors.Is(err, inject.ErrMesh) {
		t.Fatalf("bad mesh: %v", err)
	}
	if _, err := inject.ParseValues([]byte("[not a map")); !errors.Is(err, inject.ErrValues) {
		t.Fatalf("bad values: %v", err)
	}
}
