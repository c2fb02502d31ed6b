package serve

import (
	"context"
	"testing"
	"time"
)

// TestFIFOSemOrder: waiters are admitted in arrival order, a waiter that
// gives up is skipped, and the count is conserved.
func TestFIFOSemOrder(t *testing.T) {
	s := newFIFOSem(1)
	if err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	const n = 5
	order := make(chan int, n)
	gaveUp, cancel := context.WithCancel(context.Background())
	for i := range n {
		ctx := context.Background()
		if i == 2 {
			ctx = gaveUp
		}
		go func() {
			if s.acquire(ctx) == nil {
				order <- i
			}
		}()
		// Wait until waiter i is queued, so arrival order is known.
		for {
			s.mu.Lock()
			queued := len(s.waiters) - s.head
			s.mu.Unlock()
			if queued == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	for { // wait until waiter 2 has left the queue
		s.mu.Lock()
		left := s.waiters[s.head+2] == nil
		s.mu.Unlock()
		if left {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, want := range []int{0, 1, 3, 4} {
		s.release()
		if got := <-order; got != want {
			t.Fatalf("admitted %d, want %d", got, want)
		}
	}
	s.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free != 1 || s.head != len(s.waiters) {
		t.Fatalf("free %d, %d waiting; want 1 free, none waiting", s.free, len(s.waiters)-s.head)
	}
}
