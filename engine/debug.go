package engine

import (
	"encoding/json"
	"sort"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// ServiceView is a service as /debug/registryz shows it.
type ServiceView struct {
	Hostname     string            `json:"hostname"`
	Namespace    string            `json:"namespace"`
	Name         string            `json:"name"`
	Origin       string            `json:"origin"`
	Addresses    []string          `json:"addresses,omitempty"`
	Ports        []PortView        `json:"ports"`
	Resolution   string            `json:"resolution"`
	MeshExternal bool              `json:"meshExternal,omitempty"`
	ExportTo     []string          `json:"exportTo,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Selector     map[string]string `json:"selector,omitempty"`
	Endpoints    []EndpointView    `json:"endpoints"`
}

// PortView is a service port.
type PortView struct {
	Name       string `json:"name,omitempty"`
	Port       uint32 `json:"port"`
	TargetPort uint32 `json:"targetPort,omitempty"`
	Protocol   string `json:"protocol"`
}

// EndpointView is one endpoint.
type EndpointView struct {
	Address        string            `json:"address"`
	Ports          map[string]uint32 `json:"ports,omitempty"`
	Source         string            `json:"source"`
	Workload       string            `json:"workload,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	ServiceAccount string            `json:"serviceAccount,omitempty"`
	Locality       string            `json:"locality,omitempty"`
	Network        string            `json:"network,omitempty"`
	Weight         uint16            `json:"weight,omitempty"`
	Health         string            `json:"health"`
	TLSMode        string            `json:"tlsMode"`
}

// ConfigView is one config object as /debug/configz shows it.
type ConfigView struct {
	Kind       string          `json:"kind"`
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	Source     string          `json:"source,omitempty"`
	Generation int64           `json:"generation,omitempty"`
	Spec       json.RawMessage `json:"spec"`
}

var (
	resolutionNames = [...]string{"ClientSideLB", "DNS", "DNSRoundRobin", "Passthrough"}
	healthNames     = [...]string{"HEALTHY", "UNHEALTHY", "DRAINING"}
)

// Registry renders every service of snap with its endpoints, sorted by
// hostname and namespace.
func Registry(snap *index.Snapshot) []ServiceView {
	str := snap.String
	var out []ServiceView
	snap.Services(func(_ index.ServiceID, s *index.Service) bool {
		v := ServiceView{
			Hostname:     str(s.Key.Host),
			Namespace:    str(s.Key.Namespace),
			Name:         str(s.Name),
			Origin:       map[index.Origin]string{index.OriginKubernetes: "Kubernetes", index.OriginServiceEntry: "ServiceEntry"}[s.Origin],
			Resolution:   resolutionNames[s.Resolution],
			MeshExternal: s.MeshExternal,
			Labels:       labelMap(snap, s.Labels),
			Ports:        []PortView{},
			Endpoints:    []EndpointView{},
		}
		if s.HasSelector {
			v.Selector = labelMap(snap, s.Selector)
		}
		for _, a := range s.Addresses {
			if a.IsSingleIP() {
				v.Addresses = append(v.Addresses, a.Addr().String())
			} else {
				v.Addresses = append(v.Addresses, a.String())
			}
		}
		for _, p := range s.Ports {
			v.Ports = append(v.Ports, PortView{Name: str(p.Name), Port: p.Number, TargetPort: p.TargetPort, Protocol: p.Protocol.String()})
		}
		v.ExportTo = exportToStrings(snap, &s.ExportTo)
		if sh := snap.Endpoints(s.Key); sh != nil {
			v.Endpoints = endpointViews(snap, sh)
		}
		out = append(out, v)
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Hostname != out[j].Hostname {
			return out[i].Hostname < out[j].Hostname
		}
		return out[i].Namespace < out[j].Namespace
	})
	return out
}

func endpointViews(snap *index.Snapshot, sh *index.EndpointShard) []EndpointView {
	str := snap.String
	var out []EndpointView
	for _, g := range sh.Groups {
		var ports map[string]uint32
		if len(g.Ports) > 0 {
			ports = map[string]uint32{}
			for _, p := range g.Ports {
				ports[str(p.Name)] = p.Port
			}
		}
		for _, e := range g.Endpoints {
			addr := str(e.Hostname)
			if e.Addr.IsValid() {
				addr = e.Addr.String()
			}
			tls := "disabled"
			if e.TLSMode == index.TLSModeIstio {
				tls = "istio"
			}
			out = append(out, EndpointView{
				Address: addr, Ports: ports, Source: str(g.Source), Workload: str(e.Workload),
				Labels: labelMap(snap, e.Labels), ServiceAccount: str(e.ServiceAccount),
				Locality: str(e.Locality), Network: str(e.Network), Weight: e.Weight,
				Health: healthNames[e.Health], TLSMode: tls,
			})
		}
	}
	return out
}

func exportToStrings(snap *index.Snapshot, e *index.ExportTo) []string {
	switch {
	case e.None:
		return []string{"~"}
	case !e.Private && len(e.Namespaces) == 0:
		return nil
	}
	var out []string
	if e.Private {
		out = append(out, ".")
	}
	for _, n := range e.Namespaces {
		out = append(out, snap.String(n))
	}
	return out
}

func labelMap(snap *index.Snapshot, id index.LabelSetID) map[string]string {
	ls := snap.Labels.Get(id)
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[snap.String(l.Key)] = snap.String(l.Value)
	}
	return m
}

// Configs renders every Istio config object of snap, sorted by kind,
// namespace and name.
func Configs(snap *index.Snapshot) []ConfigView {
	var out []ConfigView
	for k := index.ConfigKind(0); int(k) < index.NumConfigKinds; k++ {
		snap.Configs(k, func(c *index.Config) bool {
			v := ConfigView{Kind: k.String(), Namespace: snap.String(c.Key.Namespace), Name: snap.String(c.Key.Name),
				Generation: c.Generation, Spec: json.RawMessage("{}")}
			if c.SourceFile != 0 {
				v.Source = snap.String(c.SourceFile) + ":" + strconv.Itoa(int(c.SourceLine))
			}
			if m, ok := c.Spec.(proto.Message); ok {
				if b, err := protojson.Marshal(m); err == nil {
					v.Spec = b
				}
			}
			out = append(out, v)
			return true
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}
