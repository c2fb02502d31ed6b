package rules

import (
	"slices"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// DefaultLogs are the access logs of a proxy no Telemetry's accessLogging
// applies to, as istiod's AccessLogging and its fallback decide: the
// loggers of defaultProviders.accessLogging, by provider name; when they
// give none, the accessLogFile logger. A provider whose service resolves
// reports false for is left out (nil: every service resolves).
func DefaultLogs(m *encode.Mesh, resolves func(service string) bool) []encode.AccessLog {
	type named struct {
		name string
		log  encode.AccessLog
	}
	var logs []named
	for _, n := range m.DefaultLogging {
		p := providerByName(m, n)
		if !providerLogs(p, resolves) || slices.ContainsFunc(logs, func(x named) bool { return x.name == p.Name }) {
			continue
		}
		logs = append(logs, named{p.Name, *p.Log})
	}
	slices.SortStableFunc(logs, func(a, b named) int { return strings.Compare(a.name, b.name) })
	if len(logs) == 0 {
		if m.MeshAccessLog != nil {
			return []encode.AccessLog{*m.MeshAccessLog}
		}
		return nil
	}
	out := make([]encode.AccessLog, len(logs))
	for i := range logs {
		out[i] = logs[i].log
	}
	return out
}

// providerLogs reports whether p gives a logger: it has one and its
// service, if any, resolves (istiod's telemetryAccessLog is nil
// otherwise).
func providerLogs(p *encode.TelemetryProvider, resolves func(string) bool) bool {
	return p != nil && p.Log != nil && (p.Service == "" || resolves == nil || resolves(p.Service))
}

// serviceResolver is resolves for sideLogs and DefaultLogs in snap:
// istiod's LookupCluster (lookupProviderService).
func serviceResolver(snap *index.Snapshot) func(string) bool {
	return func(service string) bool {
		_, err := lookupProviderService(snap, service)
		return err == nil
	}
}

// defaultTelemetry is the mesh's telemetry for a proxy no Telemetry
// applies to (mesh.DefaultTelemetry), without the default loggers whose
// service snap lacks; the mesh's own value when every one resolves.
func defaultTelemetry(snap *index.Snapshot, mesh *encode.Mesh) *encode.Telemetry {
	t := mesh.DefaultTelemetry()
	resolves := serviceResolver(snap)
	if t == nil || !slices.ContainsFunc(mesh.DefaultLogging, func(n string) bool {
		p := providerByName(mesh, n)
		return p != nil && p.Log != nil && !providerLogs(p, resolves)
	}) {
		return t
	}
	logs := DefaultLogs(mesh, resolves)
	if !t.Client.Stats && !t.Server.Stats && len(logs) == 0 {
		return nil
	}
	cp := *t
	cp.Client.Logs, cp.Server.Logs = logs, logs
	return &cp
}
