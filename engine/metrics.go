package engine

import "time"

// Metrics receives the engine's measurements; cmd wires it to Prometheus
// with istiod's metric names.
type Metrics interface {
	// Proxies is the number of connected proxies (pilot_xds).
	Proxies(n int)
	// PushQueued counts pushes queued, by reason (pilot_xds_pushes).
	PushQueued(reason string, conns int)
	// QueueTime is how long a push waited for its connection (pilot_proxy_queue_time).
	QueueTime(d time.Duration)
	// Converged is the time from sending a response to its ACK (pilot_proxy_convergence_time).
	Converged(typeURL string, d time.Duration)
	// Rejected counts NACKs (pilot_total_xds_rejects).
	Rejected(typeURL string)
	// Debounced is how long changes were held before a push (pilot_debounce_time).
	Debounced(d time.Duration, fastPath bool)
}

type nopMetrics struct{}

func (nopMetrics) Proxies(int)                     {}
func (nopMetrics) PushQueued(string, int)          {}
func (nopMetrics) QueueTime(time.Duration)         {}
func (nopMetrics) Converged(string, time.Duration) {}
func (nopMetrics) Rejected(string)                 {}
func (nopMetrics) Debounced(time.Duration, bool)   {}
