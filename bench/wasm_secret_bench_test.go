package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// wasmPullSecretBench is a dockerconfigjson Secret the authn plugin of
// wasmBenchPlugins names as its image pull secret.
const wasmPullSecretBench = `
---
apiVersion: v1
kind: Secret
metadata: {name: pull, namespace: default}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths":{"ghcr.io":{"auth":"dXNlcjpwYXNz"}}}'
`

// BenchmarkECDSPullSecret: a warm proxy's ECDS answer (the three plugins of
// BenchmarkProxyConfigWasm, authn naming a pull secret) on a plaintext
// stream (the shared resources) and on an authenticated one (authn's
// variant holding the Secret, swapped into the stream's copy).
func BenchmarkECDSPullSecret(b *testing.B) {
	y, err := istiobench.Render("http", istiobench.Params{Services: 100})
	if err != nil {
		b.Fatal(err)
	}
	plugins := strings.Replace(wasmBenchPlugins, "  phase: AUTHN\n", "  phase: AUTHN\n  imagePullSecret: pull\n", 1)
	w := index.NewWriter()
	if err := Load(w, append(y, plugins+wasmPullSecretBench...)); err != nil {
		b.Fatal(err)
	}
	for _, verified := range []bool{false, true} {
		b.Run(fmt.Sprintf("verified=%v", verified), func(b *testing.B) {
			cache := encode.NewCache()
			cache.SetVerify(false)
			e := engine.New(w, engine.Options{Cache: cache})
			ctx := context.Background()
			if verified {
				ctx = engine.WithVerifiedIdentity(ctx)
			}
			first, err := e.Connect(ctx, node("10.0.0.1", "pod-0"), "")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := first.Generate(engine.TypeExtensionConfig, wasmBenchNames, false, nil); err != nil {
				b.Fatal(err)
			}
			c, err := e.Connect(ctx, node("10.0.0.2", "pod-1"), "")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var size int
			for b.Loop() {
				res, err := c.Generate(engine.TypeExtensionConfig, wasmBenchNames, false, nil)
				if err != nil || len(res) != len(wasmBenchNames) {
					b.Fatalf("ECDS: %d resources, %v", len(res), err)
				}
				size = 0
				for _, r := range res {
					size += len(r.Any)
				}
			}
			b.ReportMetric(float64(size), "bytes/proxy")
		})
	}
}
