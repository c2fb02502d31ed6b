package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// TestNACKLoggedOnceAndCounted: in the assembled server a rejected response
// is logged once (by serve, the client's message clipped) and counted once
// in pilot_total_xds_rejects, however often the proxy repeats the NACK of
// that nonce.
func TestNACKLoggedOnceAndCounted(t *testing.T) {
	logs := &lockedBuffer{}
	s := startServeWith(t, &serveOptions{configDir: debugMesh(t), logLevel: "info", logOut: logs})
	c := newADSClient(t, s.grpcAddr.String(), "reviews-1", "shop", "10.244.0.5")
	r := c.request(engine.TypeCluster)
	long := strings.Repeat("x", 64<<10)
	for range 5 {
		c.nack(r, long)
	}
	base := "http://" + s.httpAddr.String()
	eventually(t, "the NACK counted", func() string {
		if got := metricSample(t, base, "pilot_total_xds_rejects", `type="cds"`); got != 1 {
			return fmt.Sprintf("pilot_total_xds_rejects{type=cds} = %v", got)
		}
		return ""
	})
	time.Sleep(200 * time.Millisecond) // repeated NACKs would have been handled by now
	if got := metricSample(t, base, "pilot_total_xds_rejects", `type="cds"`); got != 1 {
		t.Errorf("pilot_total_xds_rejects{type=cds} = %v after 5 NACKs of one nonce, want 1", got)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "rejected") && !strings.Contains(l, "connect rejected") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines about the rejection, want 1: %q", len(lines), lines)
	}
	if len(lines[0]) > 8<<10 {
		t.Errorf("the rejection's log line is %d bytes; the client's 64 KiB message must be clipped", len(lines[0]))
	}
}
