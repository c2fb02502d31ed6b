package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// wasmBenchPlugins are three WasmPlugins as a mesh commonly has them: a
// mesh-wide STATS plugin (root namespace), a namespace-wide AUTHN plugin
// with a config, and a CLIENT plugin on one port.
const wasmBenchPlugins = `
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: stats, namespace: istio-system}
spec:
  url: oci://ghcr.io/example/stats:v1
  phase: STATS
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: authn, namespace: default}
spec:
  url: oci://ghcr.io/example/authn:v1
  phase: AUTHN
  pluginConfig: {header: x-auth}
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: client, namespace: default}
spec:
  url: oci://ghcr.io/example/client:v1
  match: [{mode: CLIENT, ports: [{number: 80}]}]
`

// wasmBenchNames are the plugins' ECDS names, which a proxy subscribes to.
var wasmBenchNames = []string{
	encode.WasmResourceName("istio-system", "stats"),
	encode.WasmResourceName("default", "authn"),
	encode.WasmResourceName("default", "client"),
}

// BenchmarkProxyConfigWasm: BenchmarkProxyConfigCold and Warm with three
// WasmPlugins applying to the proxy, and its ECDS subscription. Compare
// with ProxyConfig(Cold|Warm) (no WasmPlugin).
func BenchmarkProxyConfigWasm(b *testing.B) {
	for _, wc := range []workloadCase{{"http", 100}, {"http", 1000}} {
		setupWasm := func(b *testing.B) (*index.Writer, []string, []string) {
			y, err := istiobench.Render(wc.name, istiobench.Params{Services: wc.services})
			if err != nil {
				b.Fatal(err)
			}
			w := index.NewWriter()
			if err := Load(w, append(y, wasmBenchPlugins...)); err != nil {
				b.Fatal(err)
			}
			e := engine.New(w, engine.Options{Cache: encode.NewCache()})
			c, err := e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
			if err != nil {
				b.Fatal(err)
			}
			eds, rds := subscriptions(b, c)
			return w, eds, rds
		}
		config := func(b testing.TB, c *engine.Conn, eds, rds []string) (int, int) {
			n, size := fullConfig(b, c, eds, rds)
			ext, err := c.Generate(engine.TypeExtensionConfig, wasmBenchNames, false, nil)
			if err != nil || len(ext) != len(wasmBenchNames) {
				b.Fatalf("ECDS: %d resources, %v", len(ext), err)
			}
			for _, r := range ext {
				size += len(r.Any)
			}
			return n + len(ext), size
		}
		b.Run(fmt.Sprintf("cold/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setupWasm(b)
			benchColdOf(b, w, nil, config, eds, rds)
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setupWasm(b)
			benchWarmOf(b, w, nil, config, eds, rds)
		})
	}
}
