package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Report is what a Run measured. Its JSON form (WriteJSON) is the stable,
// machine-readable output of `pilotfish loadgen --json`: field names are
// snake_case, durations are float milliseconds in fields ending in _ms, and
// times are measured from the start of the run unless said otherwise.
type Report struct {
	Target         string  `json:"target"`
	ProxyType      string  `json:"proxy_type"`
	Mode           string  `json:"mode"`
	Decode         string  `json:"decode"`
	Proxies        int     `json:"proxies"`
	StreamsPerConn int     `json:"streams_per_conn"`
	Transport      string  `json:"transport"` // grpc or h2c
	Connections    int     `json:"connections"`
	RampPerSecond  float64 `json:"ramp_per_second"`
	NackRate       float64 `json:"nack_rate"`

	StartedAt time.Time `json:"started_at"` // wall clock
	ElapsedMS float64   `json:"elapsed_ms"`
	// Complete: every proxy reached full config and every change converged
	// on every proxy.
	Complete bool `json:"complete"`

	Launched   int `json:"launched"`    // proxies started (Ramp)
	Connected  int `json:"connected"`   // proxies that opened a stream at least once
	FullConfig int `json:"full_config"` // proxies that reached full config
	// AllFullConfigMS is when the last proxy reached full config; 0 if not
	// every proxy did.
	AllFullConfigMS float64 `json:"all_full_config_ms"`
	// TimeToFullConfig is per proxy, from its launch until every type it
	// subscribes to is ACKed and every EDS/RDS (and, for gRPC, CDS/LDS) name
	// it asked for is held.
	TimeToFullConfig Latency `json:"time_to_full_config"`
	// BytesToFullConfig is what all proxies received until the last one had
	// full config (or the end of the run).
	BytesToFullConfig int64 `json:"bytes_to_full_config"`

	Types   []TypeStats   `json:"types"` // cds, eds, lds, rds, other
	Changes []ChangeStats `json:"changes"`
	// NACKs are the NACKs sent, the one count every output (table, HTML,
	// JSON) shows.
	NACKs NACKStats `json:"nacks"`
	// Faults is set when the run had faulty proxies.
	Faults   *FaultStats  `json:"faults,omitempty"`
	Errors   ErrorStats   `json:"errors"`
	Process  ProcessStats `json:"process"`
	Timeline []Sample     `json:"timeline"`
	// Server is what was sampled of the server under test
	// (Config.ServerMetrics, Config.ServerPID); nil when neither was set.
	Server *ServerStats `json:"server,omitempty"`
}

// NACKStats count the NACKs sent over the run.
type NACKStats struct {
	// Total is every NACK sent: the sum of Types[].NACKs, and AtRate plus
	// ByNackingProxies.
	Total int64 `json:"total"`
	// AtRate were sent at Config.NackRate by the other proxies.
	AtRate int64 `json:"at_rate"`
	// ByNackingProxies were sent by the NACKing proxies
	// (Config.NackingProxies), which NACK every response.
	ByNackingProxies int64 `json:"by_nacking_proxies"`
	// ProxiesRejecting is how many proxies ended the run with a type whose
	// last response they NACKed (the NACKing proxies included): the
	// server did not resend it, so they kept what they had before.
	ProxiesRejecting int `json:"proxies_rejecting"`
}

// Latency summarises a distribution.
type Latency struct {
	Count  int     `json:"count"`
	MinMS  float64 `json:"min_ms"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	// CDFMS[q] is the q-th percentile, q = 0..100 (101 points; empty when
	// Count is 0).
	CDFMS []float64 `json:"cdf_ms,omitempty"`
}

// TypeStats are the totals of one resource type over all proxies.
type TypeStats struct {
	Type      string `json:"type"`      // cds, eds, lds, rds or other
	Responses int64  `json:"responses"` // pushes received
	Resources int64  `json:"resources"` // resources in them
	Bytes     int64  `json:"bytes"`     // message bytes
	ACKs      int64  `json:"acks"`
	NACKs     int64  `json:"nacks"`
	// Invalid counts resources that failed ValidateAll (decode "full").
	Invalid int64 `json:"invalid"`
	// HeldMin and HeldMax are the resources held per proxy at the end.
	HeldMin int `json:"held_min"`
	HeldMax int `json:"held_max"`
	// ResponseLatency is from a request that subscribed to new names to
	// the next response of the type.
	ResponseLatency Latency `json:"response_latency"`
}

// ChangeStats measure one change.
type ChangeStats struct {
	Index int `json:"index"` // 1-based
	// Expect is the resource that recognises the change; empty: any
	// version bump.
	Expect       string  `json:"expect,omitempty"`
	AtMS         float64 `json:"at_ms"`
	Error        string  `json:"error,omitempty"`
	Converged    int     `json:"converged"`
	NotConverged int     `json:"not_converged"`
	// Convergence is per proxy, from the start of the change until the
	// proxy ACKed config reflecting it and had full config.
	Convergence Latency `json:"convergence"`
	// Responses and Bytes were received by all proxies from the start of
	// the change until it converged (or timed out).
	Responses int64 `json:"responses"`
	Bytes     int64 `json:"bytes"`
	// NackingReceived is how many responses the NACKing proxies received
	// during the change (a server that does not loop: one per type pushed
	// per proxy).
	NackingReceived int64 `json:"nacking_received,omitempty"`
}

// FaultStats describe the faulty proxies (Config.StalledProxies and
// NackingProxies), which the other figures leave out.
type FaultStats struct {
	Stalled int `json:"stalled"` // stopped reading after full config
	Nacking int `json:"nacking"` // NACKed every response
	// NackingReceived is every response the NACKing proxies received.
	NackingReceived int64 `json:"nacking_received"`
}

// ErrorStats count failures.
type ErrorStats struct {
	Connect     int64  `json:"connect"` // stream opens that failed
	Stream      int64  `json:"stream"`  // streams that broke after opening
	Decode      int64  `json:"decode"`  // malformed responses
	Last        string `json:"last,omitempty"`
	LastInvalid string `json:"last_invalid,omitempty"` // a ValidateAll failure
}

// ProcessStats describe the loadgen process itself (including anything else
// running in it, such as an in-process server in tests).
type ProcessStats struct {
	CPUUserSeconds   float64 `json:"cpu_user_seconds"`
	CPUSystemSeconds float64 `json:"cpu_system_seconds"`
	MaxRSSBytes      int64   `json:"max_rss_bytes"`
	// When the last proxy reached full config, after a forced GC that
	// returned free memory to the OS (steady state: what the proxies keep):
	// resident set size and live heap.
	RSSAtFullConfigBytes   int64 `json:"rss_at_full_config_bytes"`
	HeapAtFullConfigBytes  int64 `json:"heap_at_full_config_bytes"`
	GoroutinesAtFullConfig int   `json:"goroutines_at_full_config"`
	InternedNames          int   `json:"interned_names"`
}

// Sample is one point of the timeline, taken every 250ms (coarser for long
// runs).
type Sample struct {
	AtMS       float64 `json:"t_ms"`
	Launched   int     `json:"launched"`
	Connected  int     `json:"connected"`
	FullConfig int     `json:"full_config"`
	Responses  int64   `json:"responses"`
	Bytes      int64   `json:"bytes"`
	NACKs      int64   `json:"nacks"`   // sent so far
	Nacking    int     `json:"nacking"` // proxies whose last response of some type was NACKed
	Stalled    int     `json:"stalled"` // stalled proxies not reading their stream
	CPUSeconds float64 `json:"cpu_seconds"`
	RSSBytes   int64   `json:"rss_bytes"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Type returns the stats of type name (cds, eds, lds, rds, other).
func (r *Report) Type(name string) TypeStats {
	for _, t := range r.Types {
		if t.Type == name {
			return t
		}
	}
	return TypeStats{Type: name}
}

// report builds the Report; proxies have stopped.
func (r *runner) report() *Report {
	cfg := r.cfg
	rep := &Report{
		Target:         cfg.XDS,
		ProxyType:      string(cfg.Type),
		Mode:           string(cfg.Mode),
		Decode:         string(cfg.Decode),
		Proxies:        cfg.Proxies,
		StreamsPerConn: cfg.StreamsPerConn,
		Transport:      cfg.Transport,
		Connections:    len(r.conns),
		RampPerSecond:  cfg.Ramp,
		NackRate:       cfg.NackRate,
		StartedAt:      r.start,
		ElapsedMS:      ms(r.end.Sub(r.start)),
		Launched:       int(r.launched.Load()),
		Connected:      int(r.everConnected.Load()),
		FullConfig:     int(r.fullCount.Load()),
	}
	if cfg.Transport == TransportH2C {
		rep.Connections = int(r.launched.Load()) // one per proxy
	}
	var ttfc []time.Duration
	for i := range r.ttfc {
		if d := r.ttfc[i].Load(); d > 0 {
			ttfc = append(ttfc, time.Duration(d))
		}
	}
	rep.TimeToFullConfig = latencyOf(ttfc)
	if rep.FullConfig == cfg.expectFull() {
		rep.AllFullConfigMS = ms(time.Duration(r.lastFull.Load()))
		rep.BytesToFullConfig = r.bytesAtFull
	} else {
		rep.BytesToFullConfig = r.totalBytes()
	}
	for t := range numTypes + 1 {
		c := &r.types[t]
		ts := TypeStats{
			Type:            typeNames[t],
			Responses:       c.responses.Load(),
			Resources:       c.resources.Load(),
			Bytes:           c.bytes.Load(),
			ACKs:            c.acks.Load(),
			NACKs:           c.nacks.Load(),
			Invalid:         c.invalid.Load(),
			ResponseLatency: c.latency.latency(),
			HeldMin:         -1,
		}
		for _, p := range r.proxies {
			if p == nil || xtype(t) == typeOther {
				continue
			}
			h := p.held(xtype(t))
			ts.HeldMax = max(ts.HeldMax, h)
			if ts.HeldMin < 0 || h < ts.HeldMin {
				ts.HeldMin = h
			}
		}
		ts.HeldMin = max(ts.HeldMin, 0)
		rep.Types = append(rep.Types, ts)
	}
	for _, ts := range rep.Types {
		rep.NACKs.Total += ts.NACKs
	}
	rep.NACKs.ByNackingProxies = r.faultNACKs.Load()
	rep.NACKs.AtRate = rep.NACKs.Total - rep.NACKs.ByNackingProxies
	for _, p := range r.proxies {
		if p != nil && p.nackedTypes != 0 {
			rep.NACKs.ProxiesRejecting++
		}
	}
	rep.Complete = rep.FullConfig == cfg.expectFull() && len(r.changes) == cfg.Changes
	if cfg.StalledProxies+cfg.NackingProxies > 0 {
		rep.Faults = &FaultStats{Stalled: cfg.StalledProxies, Nacking: cfg.NackingProxies, NackingReceived: r.nackingReceived.Load()}
	}
	for _, ch := range r.changes {
		cs := ChangeStats{
			Index:     ch.index,
			AtMS:      ms(ch.start.Sub(r.start)),
			Responses: ch.respEnd - ch.respStart,
			Bytes:     ch.bytesEnd - ch.bytesStart,
		}
		if ch.expect != nil {
			cs.Expect = ch.expect.String()
		}
		if ch.err != nil {
			cs.Error = ch.err.Error()
		}
		var conv []time.Duration
		for i := range ch.conv {
			if d := ch.conv[i].Load(); d > 0 {
				conv = append(conv, time.Duration(d))
			}
		}
		cs.Converged = len(conv)
		cs.NotConverged = cfg.healthyProxies() - len(conv)
		if cfg.NackingProxies > 0 {
			cs.NackingReceived = ch.nackingEnd - ch.nackingStart
		}
		cs.Convergence = latencyOf(conv)
		if cs.NotConverged > 0 || ch.err != nil {
			rep.Complete = false
		}
		rep.Changes = append(rep.Changes, cs)
	}
	r.errMu.Lock()
	rep.Errors = ErrorStats{
		Connect:     r.connectErrors.Load(),
		Stream:      r.streamErrors.Load(),
		Decode:      r.decodeErrors.Load(),
		Last:        r.lastErr,
		LastInvalid: r.lastInvalid,
	}
	r.errMu.Unlock()
	rep.Process = r.atFull
	rep.Process.CPUUserSeconds = (r.userAtEnd - r.userAtStart).Seconds()
	rep.Process.CPUSystemSeconds = (r.sysAtEnd - r.sysAtStart).Seconds()
	rep.Process.MaxRSSBytes = maxRSS()
	rep.Process.InternedNames = r.syms.size()
	r.timelineMu.Lock()
	rep.Timeline = slices.Clone(r.timeline)
	r.timelineMu.Unlock()
	if r.server != nil {
		rep.Server = r.server.stats()
	}
	return rep
}

func changeSummary(rep *Report) string {
	var b strings.Builder
	for _, c := range rep.Changes {
		fmt.Fprintf(&b, "; change %d converged on %d of %d", c.Index, c.Converged, c.Converged+c.NotConverged)
	}
	return b.String()
}
