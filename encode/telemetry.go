package encode

import (
	"slices"
	"time"

	accesslog "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	stats "istio.io/api/envoy/extensions/stats"
)

// Istio's standard metrics (istio_requests_total, istio_tcp_*, ...) come
// from the proxy's istio.stats filter, and its access logs from the
// access_log of every HTTP connection manager, tcp_proxy and some
// listeners. istiod decides both per proxy and listener class from the
// mesh config (defaultProviders, accessLogFile) and the Telemetry
// resources that apply to the workload (docs/telemetry.md). A Telemetry
// value is that decision for one proxy class; the listener keys hold it
// (interned by rules, so classes that resolve to the same telemetry share
// listener bytes), and nil means none: no stats filter, no access log.

// statsFilterName is the name istiod gives the filter (xds.StatsFilterName).
const statsFilterName = "istio.stats"

// Telemetry is what istiod's Telemetries computes for one proxy: the stats
// filter and the access logs of its client side (sidecar outbound and
// gateways, Telemetry mode CLIENT) and of its server side (sidecar
// inbound, mode SERVER). Immutable once a key holds it.
type Telemetry struct {
	Client, Server TelemetrySide
	// NoListenerLogs is the mesh config's disableEnvoyListenerLog: no
	// listener-level access logs (the chains' stay).
	NoListenerLogs bool
}

// TelemetrySide is the telemetry of one listener class.
type TelemetrySide struct {
	// Stats adds the istio.stats filter, configured by Metrics and
	// TCPReportingInterval (istiod's generateStatsConfig).
	Stats bool
	// TCPReportingInterval is a Telemetry metrics reportingInterval (0:
	// the proxy's default).
	TCPReportingInterval time.Duration
	// Metrics are the overrides, sorted by name as istiod sorts them.
	Metrics []MetricOverride
	// Logs are the access logs, in istiod's order (by provider name).
	Logs []AccessLog
}

// MetricOverride is one metric's stats configuration (stats.MetricConfig).
type MetricOverride struct {
	// Name is the Prometheus name without the istio_ prefix
	// ("requests_total") or a custom metric's name.
	Name string
	Drop bool
	// Dimensions are the tags upserted, as name, value pairs sorted by name.
	Dimensions []string
	// Remove are the tags removed, sorted.
	Remove []string
}

// StatsOnly is the telemetry of a mesh whose default metrics provider is
// prometheus and that logs nothing: istio.stats on both sides.
var StatsOnly = &Telemetry{Client: TelemetrySide{Stats: true}, Server: TelemetrySide{Stats: true}}

func (t *Telemetry) hashInto(h *Hasher) {
	if t == nil {
		h.Bool(false)
		return
	}
	h.Bool(true)
	h.Bool(t.NoListenerLogs)
	for _, s := range [...]*TelemetrySide{&t.Client, &t.Server} {
		h.Bool(s.Stats)
		h.U64(uint64(s.TCPReportingInterval))
		h.Int(len(s.Metrics))
		for i := range s.Metrics {
			m := &s.Metrics[i]
			h.Str(m.Name)
			h.Bool(m.Drop)
			h.Strs(m.Dimensions)
			h.Strs(m.Remove)
		}
		h.Int(len(s.Logs))
		for i := range s.Logs {
			s.Logs[i].hashInto(h)
		}
	}
}

// Hash identifies t; equal hashes mean equal telemetry (rules interns by it).
func (t *Telemetry) Hash() uint64 {
	h := NewHasher("Telemetry")
	t.hashInto(&h)
	return h.Sum()
}

// listenerSide says which side's telemetry a listener takes and how the
// stats filter reads the Host header there.
type listenerSide uint8

const (
	sideOutbound listenerSide = iota // sidecar outbound: client, Host fallback kept
	sideInbound                      // sidecar inbound: server
	sideGateway                      // gateway: client telemetry, Host fallback off
)

func (t *Telemetry) side(s listenerSide) *TelemetrySide {
	if t == nil {
		return nil
	}
	if s == sideInbound {
		return &t.Server
	}
	return &t.Client
}

// The stats filter's configs without overrides, as istiod's
// generateStatsConfig builds them: the client side (sidecar outbound)
// keeps the Host header fallback for the destination service; the server
// side (sidecar inbound) and gateways disable it. istiod's reporter
// SERVER_GATEWAY is for waypoints only, which pilotfish does not serve.
var (
	hfStatsClient = hfTyped(statsFilterName, &stats.PluginConfig{})
	hfStatsServer = hfTyped(statsFilterName, &stats.PluginConfig{DisableHostHeaderFallback: true})
	nfStatsClient = &listener.Filter{
		Name:       statsFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: hfStatsClient.GetTypedConfig()},
	}
	nfStatsServer = &listener.Filter{
		Name:       statsFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: hfStatsServer.GetTypedConfig()},
	}
)

// statsHTTP is the HTTP stats filter of a listener side, or nil when
// stats are off there.
func (t *Telemetry) statsHTTP(s listenerSide) *hcm.HttpFilter {
	ts := t.side(s)
	switch {
	case ts == nil || !ts.Stats:
		return nil
	case ts.plain():
		if s == sideOutbound {
			return hfStatsClient
		}
		return hfStatsServer
	}
	return hfTyped(statsFilterName, ts.pluginConfig(s != sideOutbound))
}

// statsTCP is the network stats filter of a listener side, or nil.
func (t *Telemetry) statsTCP(s listenerSide) *listener.Filter {
	f := t.statsHTTP(s)
	switch {
	case f == nil:
		return nil
	case f == hfStatsClient:
		return nfStatsClient
	case f == hfStatsServer:
		return nfStatsServer
	}
	return &listener.Filter{Name: statsFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: f.GetTypedConfig()}}
}

func (s *TelemetrySide) plain() bool {
	return s.TCPReportingInterval == 0 && len(s.Metrics) == 0
}

// pluginConfig is istiod's generateStatsConfig for s.
func (s *TelemetrySide) pluginConfig(noHostFallback bool) *stats.PluginConfig {
	cfg := &stats.PluginConfig{DisableHostHeaderFallback: noHostFallback}
	if s.TCPReportingInterval != 0 {
		cfg.TcpReportingDuration = durationpb.New(s.TCPReportingInterval)
	}
	for i := range s.Metrics {
		m := &s.Metrics[i]
		mc := &stats.MetricConfig{Name: m.Name, Drop: m.Drop, Dimensions: map[string]string{}, TagsToRemove: m.Remove}
		for j := 0; j+1 < len(m.Dimensions); j += 2 {
			mc.Dimensions[m.Dimensions[j]] = m.Dimensions[j+1]
		}
		cfg.Metrics = append(cfg.Metrics, mc)
	}
	return cfg
}

// withTelemetryTCP adds a TCP chain's telemetry to filters (whose last is
// the tcp_proxy): the stats filter before it, as istiod orders them
// (metadata exchange, RBAC, stats, tcp_proxy), and, when logs, the side's
// access logs on the tcp_proxy. filters is not modified.
func withTelemetryTCP(t *Telemetry, s listenerSide, logs bool, filters []*listener.Filter) []*listener.Filter {
	sf := t.statsTCP(s)
	var al []*accesslog.AccessLog
	if logs {
		al = t.accessLogs(s, false)
	}
	if (sf == nil && len(al) == 0) || len(filters) == 0 {
		return filters
	}
	out := make([]*listener.Filter, 0, len(filters)+1)
	out = append(out, filters[:len(filters)-1]...)
	if sf != nil {
		out = append(out, sf)
	}
	last := filters[len(filters)-1]
	if len(al) > 0 {
		last = tcpProxyWithLogs(last, al)
	}
	return append(out, last)
}

// tcpProxyWithLogs returns f, a tcp_proxy filter, with access logs al.
func tcpProxyWithLogs(f *listener.Filter, al []*accesslog.AccessLog) *listener.Filter {
	p := &tcp.TcpProxy{}
	if f.GetName() != tcpProxyFilterName || f.GetTypedConfig().UnmarshalTo(p) != nil {
		return f // not a tcp_proxy: nothing istiod would log on
	}
	p.AccessLog = append(slices.Clip(p.AccessLog), al...)
	return lsTCPProxyFilter(p)
}
