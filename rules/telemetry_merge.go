package rules

import (
	"slices"
	"strings"
	"time"

	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// mergeTelemetry is istiod's merge of the applicable Telemetries' metrics
// (mergeMetrics, telemetryFilters) and access logging (mergeLogs,
// AccessLogging) for both sides of a proxy, with the mesh's extension and
// default providers; resolves is providerLogs'.
func mergeTelemetry(specs []*telemetry.Telemetry, mesh *encode.Mesh, resolves func(string) bool) *encode.Telemetry {
	var metrics []*telemetry.Metrics
	var logs [][]*telemetry.AccessLogging
	for _, s := range specs {
		metrics = append(metrics, s.GetMetrics()...)
		if len(s.GetAccessLogging()) > 0 {
			logs = append(logs, s.GetAccessLogging())
		}
	}
	mm := mergeMetrics(metrics, mesh)
	t := &encode.Telemetry{NoListenerLogs: mesh.NoListenerLogs}
	for i, mode := range [...]telemetry.WorkloadMode{telemetry.WorkloadMode_CLIENT, telemetry.WorkloadMode_SERVER} {
		side := &t.Client
		if i == 1 {
			side = &t.Server
		}
		statsSide(side, mm, mode, mesh)
		side.Logs = sideLogs(logs, mesh, mode, resolves)
	}
	if !t.Client.Stats && !t.Server.Stats && len(t.Client.Logs) == 0 && len(t.Server.Logs) == 0 {
		return nil
	}
	return t
}

// providerByName is istiod's fetchProvider: the first extension provider
// of that name, whatever its case.
func providerByName(mesh *encode.Mesh, name string) *encode.TelemetryProvider {
	for i := range mesh.TelemetryProviders {
		if strings.EqualFold(mesh.TelemetryProviders[i].Name, name) {
			return &mesh.TelemetryProviders[i]
		}
	}
	return nil
}

// metricOverride is one metric's merged override.
type metricOverride struct {
	disabled    *bool
	tags        map[string]*telemetry.MetricsOverrides_TagOverride
	hasSettings bool
}

// providerMetrics is a provider's merged metrics: per mode, per metric.
type providerMetrics struct {
	modes    map[telemetry.WorkloadMode]map[string]*metricOverride
	disabled map[telemetry.WorkloadMode]bool
	interval time.Duration
}

// mergeMetrics is istiod's mergeMetrics: the providers in scope (the last
// level that names providers, else the mesh's defaults) and, for each,
// the overrides of every level in order, later ones winning.
func mergeMetrics(metrics []*telemetry.Metrics, mesh *encode.Mesh) map[string]*providerMetrics {
	out := map[string]*providerMetrics{}
	if len(metrics) == 0 {
		for _, p := range mesh.DefaultMetrics {
			out[p] = &providerMetrics{}
		}
		return out
	}
	names := mesh.DefaultMetrics
	for _, m := range metrics {
		if n := providerNames(m.GetProviders()); len(n) > 0 {
			names = n
		}
	}
	parent := mesh.DefaultMetrics
	for _, m := range metrics {
		pn := providerNames(m.GetProviders())
		if len(pn) == 0 {
			pn = parent
		}
		parent = pn
		for _, p := range pn {
			if !slices.Contains(names, p) {
				continue // a lower level named other providers
			}
			pm := out[p]
			if pm == nil {
				pm = &providerMetrics{modes: map[telemetry.WorkloadMode]map[string]*metricOverride{}, disabled: map[telemetry.WorkloadMode]bool{}}
				out[p] = pm
			}
			if pm.modes == nil {
				pm.modes, pm.disabled = map[telemetry.WorkloadMode]map[string]*metricOverride{}, map[telemetry.WorkloadMode]bool{}
			}
			if ri := m.GetReportingInterval(); ri != nil {
				pm.interval = ri.AsDuration()
			}
			for _, o := range m.GetOverrides() {
				if allMetricsMatch(o.GetMatch()) && o.GetDisabled().GetValue() {
					for _, mode := range matchModes(o.GetMatch().GetMode()) {
						pm.disabled[mode] = true
					}
					continue
				}
				for _, mode := range matchModes(o.GetMatch().GetMode()) {
					pm.disabled[mode] = false
					if pm.modes[mode] == nil {
						pm.modes[mode] = map[string]*metricOverride{}
					}
					for _, name := range metricNames(o.GetMatch()) {
						mo := pm.modes[mode][name]
						if mo == nil {
							mo = &metricOverride{}
							pm.modes[mode][name] = mo
						}
						if d := o.GetDisabled(); d != nil {
							v := d.GetValue()
							mo.disabled = &v
						}
						for k, v := range o.GetTagOverrides() {
							if mo.tags == nil {
								mo.tags = map[string]*telemetry.MetricsOverrides_TagOverride{}
							}
							mo.tags[k] = v
						}
					}
				}
			}
		}
	}
	return out
}

// statsSide sets side's stats from the merged metrics: the filter of the
// (first, by name) prometheus provider in scope whose metrics the mode
// does not disable, with its overrides (istiod's generateStatsConfig).
func statsSide(side *encode.TelemetrySide, mm map[string]*providerMetrics, mode telemetry.WorkloadMode, mesh *encode.Mesh) {
	for _, name := range slices.Sorted(mapKeysOf(mm)) {
		p := providerByName(mesh, name)
		if p == nil || !p.Prometheus {
			continue
		}
		pm := mm[name]
		if pm.disabled[mode] {
			return
		}
		side.Stats = true
		side.TCPReportingInterval = pm.interval
		for _, metric := range slices.Sorted(mapKeysOf(pm.modes[mode])) {
			o := pm.modes[mode][metric]
			mo := encode.MetricOverride{Name: prometheusMetricName(metric), Drop: o.disabled != nil && *o.disabled}
			for _, tag := range slices.Sorted(mapKeysOf(o.tags)) {
				to := o.tags[tag]
				switch to.GetOperation() {
				case telemetry.MetricsOverrides_TagOverride_REMOVE:
					mo.Remove = append(mo.Remove, tag)
				default:
					mo.Dimensions = append(mo.Dimensions, tag, to.GetValue())
				}
			}
			side.Metrics = append(side.Metrics, mo)
		}
		return
	}
}

// prometheusNames are istiod's metricToPrometheusMetric.
var prometheusNames = map[string]string{
	"REQUEST_COUNT":          "requests_total",
	"REQUEST_DURATION":       "request_duration_milliseconds",
	"REQUEST_SIZE":           "request_bytes",
	"RESPONSE_SIZE":          "response_bytes",
	"TCP_OPENED_CONNECTIONS": "tcp_connections_opened_total",
	"TCP_CLOSED_CONNECTIONS": "tcp_connections_closed_total",
	"TCP_SENT_BYTES":         "tcp_sent_bytes_total",
	"TCP_RECEIVED_BYTES":     "tcp_received_bytes_total",
	"GRPC_REQUEST_MESSAGES":  "request_messages_total",
	"GRPC_RESPONSE_MESSAGES": "response_messages_total",
}

func prometheusMetricName(m string) string {
	if n, ok := prometheusNames[m]; ok {
		return n
	}
	return m // a custom metric
}

// allMetricNames are every standard metric (istiod's allMetrics, sorted).
var allMetricNames = func() []string {
	var out []string
	for k, v := range telemetry.MetricSelector_IstioMetric_value {
		if v != int32(telemetry.MetricSelector_ALL_METRICS) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}()

func allMetricsMatch(m *telemetry.MetricSelector) bool {
	switch x := m.GetMetricMatch().(type) {
	case *telemetry.MetricSelector_CustomMetric:
		return false
	case *telemetry.MetricSelector_Metric:
		return x.Metric == telemetry.MetricSelector_ALL_METRICS
	}
	return true
}

func metricNames(m *telemetry.MetricSelector) []string {
	switch x := m.GetMetricMatch().(type) {
	case *telemetry.MetricSelector_CustomMetric:
		return []string{x.CustomMetric}
	case *telemetry.MetricSelector_Metric:
		if x.Metric != telemetry.MetricSelector_ALL_METRICS {
			return []string{x.Metric.String()}
		}
	}
	return allMetricNames
}

func matchModes(m telemetry.WorkloadMode) []telemetry.WorkloadMode {
	if m == telemetry.WorkloadMode_CLIENT || m == telemetry.WorkloadMode_SERVER {
		return []telemetry.WorkloadMode{m}
	}
	return []telemetry.WorkloadMode{telemetry.WorkloadMode_CLIENT, telemetry.WorkloadMode_SERVER}
}

func providerNames(refs []*telemetry.ProviderRef) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.GetName())
	}
	return out
}

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// logSpec is a provider's merged access logging.
type logSpec struct {
	disabled bool
	filter   string
}

// sideLogs are one mode's access logs: istiod's mergeLogs over the levels'
// accessLogging lists, the providers' loggers sorted by provider name
// without the disabled ones and those whose service does not resolve; with no Telemetry logging and no default
// providers, or when no provider gives a logger, the mesh's accessLogFile
// (istiod's fallback).
func sideLogs(levels [][]*telemetry.AccessLogging, mesh *encode.Mesh, mode telemetry.WorkloadMode, resolves func(string) bool) []encode.AccessLog {
	fallback := func() []encode.AccessLog {
		if mesh.MeshAccessLog != nil {
			return []encode.AccessLog{*mesh.MeshAccessLog}
		}
		return nil
	}
	if len(levels) == 0 && len(mesh.DefaultLogging) == 0 {
		return fallback()
	}
	merged := mergeLogs(levels, mesh, mode)
	type cfg struct {
		name string
		spec logSpec
		log  *encode.AccessLog
	}
	var cfgs []cfg
	for name, spec := range merged {
		p := providerByName(mesh, name)
		if !providerLogs(p, resolves) { // telemetry_logs.go
			continue
		}
		cfgs = append(cfgs, cfg{p.Name, spec, p.Log})
	}
	if len(cfgs) == 0 {
		return fallback()
	}
	slices.SortStableFunc(cfgs, func(a, b cfg) int { return strings.Compare(a.name, b.name) })
	var out []encode.AccessLog
	for _, c := range cfgs {
		if c.spec.disabled {
			continue
		}
		l := *c.log
		l.Filter = c.spec.filter
		out = append(out, l)
	}
	return out
}

// mergeLogs is istiod's mergeLogs for one mode.
func mergeLogs(levels [][]*telemetry.AccessLogging, mesh *encode.Mesh, mode telemetry.WorkloadMode) map[string]logSpec {
	out := map[string]logSpec{}
	if len(levels) == 0 {
		for _, p := range mesh.DefaultLogging {
			out[p] = logSpec{}
		}
		return out
	}
	names := mesh.DefaultLogging
	filters := map[string]logSpec{}
	for _, level := range levels {
		var set []string
		for _, l := range level {
			if !logModeMatches(l.GetMatch(), mode) {
				continue
			}
			for _, p := range providerNames(l.GetProviders()) {
				if !slices.Contains(set, p) {
					set = append(set, p)
				}
				filters[p] = logSpec{filter: l.GetFilter().GetExpression()}
			}
		}
		if len(set) > 0 {
			names = set
		}
	}
	parent := mesh.DefaultLogging
	for _, level := range levels {
		for _, l := range level {
			pn := providerNames(l.GetProviders())
			if len(pn) == 0 {
				pn = parent
			}
			parent = pn
			for _, p := range pn {
				if !slices.Contains(names, p) || !logModeMatches(l.GetMatch(), mode) {
					continue
				}
				if l.GetDisabled().GetValue() {
					out[p] = logSpec{disabled: true}
					continue
				}
				out[p] = filters[p]
			}
		}
	}
	return out
}

func logModeMatches(s *telemetry.AccessLogging_LogSelector, mode telemetry.WorkloadMode) bool {
	return s == nil || s.GetMode() == telemetry.WorkloadMode_CLIENT_AND_SERVER || s.GetMode() == mode
}
