package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"

	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

// BenchmarkSecretRotationPush: one Secret rotated among 2,000 routers of
// 200 namespaces, each reading its namespace's kubernetes://gw-cert. The
// push goes to the 10 routers of that namespace; reported as proxies/op
// with the run loop's CPU for deciding it (e.push; the regeneration each
// pushed stream then does is SDS alone).
func BenchmarkSecretRotationPush(b *testing.B) {
	const namespaces, perNS = 200, 10
	w := index.NewWriter()
	sy := w.Symbols()
	cert, key := testcert.SelfSigned(b, "gw.example.com")
	var batch index.Batch
	for i := range namespaces {
		batch.PutConfig(sdsSecretRow(sy, fmt.Sprint("ns", i), "gw-cert", cert, key))
	}
	w.Apply(&batch)
	e := New(w, Options{})
	ctx := context.Background()
	var conns []*Conn
	for i := range namespaces {
		for j := range perNS {
			c, err := e.Connect(ctx, routerNode(b, fmt.Sprintf("10.%d.%d.1", i/250, i%250), fmt.Sprint("gw-", j), fmt.Sprint("ns", i)), "")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Generate(TypeSecret, []string{"kubernetes://gw-cert"}, false, nil); err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
	}
	changed := map[index.ConfigKey]struct{}{{Namespace: sy.Intern("ns7"), Name: sy.Intern("gw-cert")}: {}}
	pushed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e.push(pendingChanges{secrets: changed})
		b.StopTimer()
		for _, c := range conns {
			if _, ok := c.TakePush(); ok {
				pushed++
				c.PushDone()
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(pushed)/float64(b.N), "proxies/op")
}
