package ca_test

import (
	"crypto"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// BenchmarkSign measures the CA's signing throughput in certificates per
// second: CSR parse and signature check, then the certificate signature
// (which crypto/x509 verifies once more), for the CA key types (the
// self-signed root's, --ca-key-type) and workload key types istio-agent
// uses (ECDSA P-256 with ECC_SIGNATURE_ALGORITHM=ECDSA, RSA 2048 by
// default). "parallel" runs on every core (GOMAXPROCS). What the numbers
// mean for a mesh: docs/ca.md.
func BenchmarkSign(b *testing.B) {
	csrKeys := []struct {
		name string
		key  crypto.Signer
	}{{"csr=ecdsa-p256", ecKey(b)}, {"csr=rsa-2048", rsaKey(b, 2048)}}
	for _, caKey := range []string{ca.KeyECDSAP256, ca.KeyRSA2048} {
		a, err := ca.New(newRootBundle(b, caKey), ca.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for _, ck := range csrKeys {
			csr := csrPEM(b, ck.key, []string{reviewsID})
			b.Run("ca="+caKey+"/"+ck.name, func(b *testing.B) {
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					if _, err := a.Sign(reviews, csr, 0); err != nil {
						b.Fatal(err)
					}
				}
				reportThroughput(b, processCPU()-cpu)
			})
			b.Run("ca="+caKey+"/"+ck.name+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := a.Sign(reviews, csr, 0); err != nil {
							b.Error(err)
							return
						}
					}
				})
				reportThroughput(b, 0)
			})
		}
	}
}

// reportThroughput reports certificates per second of wall time and, when
// cpu (the process CPU time the loop used) is known, certificates per
// CPU-second: what one core signs when nothing else runs on it.
func reportThroughput(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "certs/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "certs/cpu-s")
	}
}
