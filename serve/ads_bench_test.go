package serve_test

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// BenchmarkAssembleSotW encodes a CDS response of 1,000 cached clusters the
// way a stream sends it: digest, pooled buffer, assembly, codec. Its small
// counterpart in go test is TestEncodeCachedResponseAllocs.
func BenchmarkAssembleSotW(b *testing.B) {
	res := clusters(b, 1000)
	cp := serve.EncodeControlPlane("pilotfish-0")
	var e serve.Encoder
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = e.EncodeSotW(42, engine.TypeCluster, cp, res)
	}
	b.SetBytes(int64(n))
	b.ReportMetric(float64(len(res)), "resources/op")
}

// BenchmarkAssembleDelta is the Delta counterpart: 1,000 changed clusters.
func BenchmarkAssembleDelta(b *testing.B) {
	res := clusters(b, 1000)
	var e serve.Encoder
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = e.EncodeDelta(42, engine.TypeCluster, nil, res, nil)
	}
	b.SetBytes(int64(n))
}
