package index

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkApplyIncremental applies one-row batches to a snapshot of 10,000
// services (100,000 endpoints), 10,000 configs and 10,000 pods: the steady
// state, which a faster build from empty must not slow down.
func BenchmarkApplyIncremental(b *testing.B) {
	w := NewWriter()
	sy := w.Symbols()
	batch := meshBatch(w, 10000, 10)
	ns := sy.Intern("default")
	podNS := sy.Intern("pods") // no services: a pod change costs its table, not a join
	for i := range 10000 {
		batch.PutConfig(Config{Kind: ConfigDestinationRule, Key: ConfigKey{Namespace: ns, Name: sy.Intern(fmt.Sprintf("dr-%d", i))},
			Hosts: []Sym{sy.Intern(fmt.Sprintf("svc-%d.default.svc.cluster.local", i))}, Hash: uint64(i + 1)})
		batch.PutWorkload(Workload{Key: WorkloadKey{Kind: WorkloadPod, Namespace: podNS, Name: sy.Intern(fmt.Sprintf("pod-%d", i))},
			Addr: netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})})
	}
	w.Apply(batch)
	svc, _, _ := w.Snapshot().LookupService("svc-42.default.svc.cluster.local", "default")
	cfg, _ := w.Snapshot().Config(ConfigDestinationRule, ConfigKey{Namespace: ns, Name: sy.Intern("dr-42")})
	pod, _ := w.Snapshot().Workload(WorkloadKey{Kind: WorkloadPod, Namespace: podNS, Name: sy.Intern("pod-42")})
	newKey := ServiceKey{Host: sy.Intern("new.default.svc.cluster.local"), Namespace: ns}
	for _, tc := range []struct {
		name  string
		batch func(i int) *Batch
	}{
		{"service", func(i int) *Batch {
			s := *svc
			s.Ports = []Port{{Number: uint32(80 + i%2), Protocol: ProtocolHTTP}}
			var b Batch
			b.PutService(s)
			return &b
		}},
		// A service added, then deleted by the next batch.
		{"service-add-delete", func(i int) *Batch {
			var b Batch
			if i%2 == 0 {
				b.PutService(Service{Key: newKey, Origin: OriginKubernetes, Ports: svc.Ports})
			} else {
				b.DeleteService(newKey)
			}
			return &b
		}},
		{"config", func(i int) *Batch {
			c := *cfg
			c.Hash = uint64(i%2 + 1<<40)
			var b Batch
			b.PutConfig(c)
			return &b
		}},
		{"pod", func(i int) *Batch {
			p := *pod
			p.Ready = i%2 == 0
			var b Batch
			b.PutWorkload(p)
			return &b
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				w.Apply(tc.batch(i))
			}
		})
	}
}
