package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestLeaderElection runs two electors against a real API server: exactly
// one leads and runs the duty, never both at once; when the leader stops,
// it releases the Lease and the other takes over.
func TestLeaderElection(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	c.EnsureNamespace(t, "istio-system")
	o := leaderOptions{namespace: "istio-system", lease: "pilotfish-leader",
		leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: 200 * time.Millisecond}
	log := slog.New(slog.DiscardHandler)

	var running atomic.Int32 // duties running now, across both replicas
	var overlap atomic.Bool
	type replica struct {
		l    *leader
		stop context.CancelFunc
		done chan struct{}
	}
	start := func(id string) *replica {
		l := newLeader(c.Client, o, id, log)
		l.AddDuty(func(ctx context.Context) {
			if running.Add(1) > 1 {
				overlap.Store(true)
			}
			<-ctx.Done()
			running.Add(-1)
		})
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{l: l, stop: cancel, done: make(chan struct{})}
		go func() { l.Run(ctx); close(r.done) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	a, b := start("replica-a"), start("replica-b")

	holder := func() string {
		lease, err := c.Client.CoordinationV1().Leases("istio-system").Get(context.Background(), "pilotfish-leader", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	var first, second *replica
	eventuallyFor(t, time.Minute, "a leader", func() string {
		switch {
		case a.l.IsLeader() && b.l.IsLeader():
			t.Fatal("both replicas lead")
		case a.l.IsLeader():
			first, second = a, b
		case b.l.IsLeader():
			first, second = b, a
		default:
			return "no leader yet"
		}
		if h := holder(); h != first.l.id {
			return "lease held by " + h
		}
		if running.Load() != 1 {
			return "duty not running"
		}
		return ""
	})
	// Leadership is stable while the leader renews.
	for range 20 {
		if !first.l.IsLeader() || second.l.IsLeader() {
			t.Fatalf("leadership moved while the leader was running: first %v second %v", first.l.IsLeader(), second.l.IsLeader())
		}
		time.Sleep(50 * time.Millisecond)
	}

	first.stop()
	<-first.done
	if first.l.IsLeader() {
		t.Fatal("a stopped replica still reports leading")
	}
	eventuallyFor(t, time.Minute, "takeover", func() string {
		if !second.l.IsLeader() {
			return "the other replica does not lead"
		}
		if h := holder(); h != second.l.id {
			return "lease held by " + h
		}
		if running.Load() != 1 {
			return "duty not running"
		}
		return ""
	})
	if overlap.Load() {
		t.Fatal("the duty ran on both replicas at once")
	}
}
