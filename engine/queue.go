package engine

import "sync"

// pushQueue hands pending pushes to connections in arrival order, at most
// `slots` at a time (PILOT_PUSH_THROTTLE): a connection holds a slot from the
// moment it is signalled until serve reports the push sent (PushDone) or the
// stream closes. A burst of changes to 10,000 proxies therefore generates
// and writes at a bounded concurrency, and a connection never waits behind
// itself: pushes to one connection merge while it waits.
type pushQueue struct {
	mu      sync.Mutex
	waiting []*Conn // guarded by mu; FIFO
	head    int     // guarded by mu; index of the first waiting conn
	free    int     // guarded by mu; free slots
}

func newPushQueue(slots int) *pushQueue {
	if slots <= 0 {
		slots = 100
	}
	return &pushQueue{free: slots}
}

// add queues c (which just went from idle to pending).
func (q *pushQueue) add(c *Conn) {
	q.mu.Lock()
	q.waiting = append(q.waiting, c)
	q.mu.Unlock()
	q.dispatch()
}

// release returns a slot.
func (q *pushQueue) release() {
	q.mu.Lock()
	q.free++
	q.mu.Unlock()
	q.dispatch()
}

// dispatch signals waiting connections while slots are free. Signals happen
// outside the lock: Conn.signal may call release.
func (q *pushQueue) dispatch() {
	for {
		q.mu.Lock()
		if q.free == 0 || q.head == len(q.waiting) {
			if q.head == len(q.waiting) && q.head > 0 {
				q.waiting, q.head = q.waiting[:0], 0
			}
			q.mu.Unlock()
			return
		}
		c := q.waiting[q.head]
		q.waiting[q.head] = nil
		q.head++
		q.free--
		q.mu.Unlock()
		c.signal()
	}
}

// len returns the number of connections waiting for a slot.
func (q *pushQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting) - q.head
}
