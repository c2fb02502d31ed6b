package ingest_test

import (
	"os"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// BenchmarkDecode measures decoding (with its schema checks) and
// validation of the bookinfo manifests, per object.
func BenchmarkDecode(b *testing.B) {
	data, err := os.ReadFile("testdata/valid/bookinfo.yaml")
	if err != nil {
		b.Fatal(err)
	}
	objs, errs := ingest.Decode("bookinfo.yaml", data)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			ingest.Decode("bookinfo.yaml", data)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(objs)), "ns/object")
	})
	b.Run("Validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range objs {
				ingest.Validate(&objs[i])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(objs)), "ns/object")
	})
}
