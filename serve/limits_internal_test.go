package serve

import (
	"context"
	"testing"
	"time"
)

// TestAdmissionOrder: waiters are admitted oldest stream first (then in
// arrival order), a waiter that gives up is skipped, and the count is
// conserved.
func TestAdmissionOrder(t *testing.T) {
	s := newAdmission(1)
	if err := s.acquire(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	// Arrivals (stream seq): 5, 3, 9 (gives up), 3, 1.
	seqs := []uint64{5, 3, 9, 3, 1}
	order := make(chan int, len(seqs))
	gaveUp, cancel := context.WithCancel(context.Background())
	for i, seq := range seqs {
		ctx := context.Background()
		if i == 2 {
			ctx = gaveUp
		}
		go func() {
			if s.acquire(ctx, seq) == nil {
				order <- i
			}
		}()
		waitUntil(t, func() bool { return len(s.waiting) == i+1 }, s) // arrival order is known
	}
	cancel()
	waitUntil(t, func() bool { return len(s.waiting) == len(seqs)-1 }, s) // waiter 2 left
	for _, want := range []int{4, 1, 3, 0} {                              // seq 1, then seq 3 in arrival order, then seq 5
		s.release()
		if got := <-order; got != want {
			t.Fatalf("admitted waiter %d, want %d", got, want)
		}
	}
	s.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free != 1 || len(s.waiting) != 0 {
		t.Fatalf("free %d, %d waiting; want 1 free, none waiting", s.free, len(s.waiting))
	}
}

func waitUntil(t *testing.T, cond func() bool, s *admission) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
