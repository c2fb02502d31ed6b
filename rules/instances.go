package rules

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// ComputeInstances finds the service ports a sidecar backs (its inbound
// side; nil for a router, which has none: see ComputeGatewayTargets).
func ComputeInstances(snap *index.Snapshot, n *Node) []Instance {
	if n.Type == encode.ProxyRouter {
		return nil
	}
	return serviceTargets(snap, n)
}

// ComputeGatewayTargets finds the service ports a router backs (nil for
// another proxy): istiod binds a Gateway server on the target port of the
// router's service port of the server's number (gateway_ports.go).
func ComputeGatewayTargets(snap *index.Snapshot, n *Node) []Instance {
	if n.Type != encode.ProxyRouter {
		return nil
	}
	return serviceTargets(snap, n)
}

// ClassInstancesKey is the part of a proxy's class key its service targets
// make: proxies backing different service ports are different classes.
func ClassInstancesKey(snap *index.Snapshot, n *Node) string {
	if n.Type == encode.ProxyRouter {
		return InstancesKey(snap, ComputeGatewayTargets(snap, n))
	}
	return InstancesKey(snap, ComputeInstances(snap, n))
}

// serviceTargets finds the service ports a proxy backs, as istiod's
// ServiceTargets: the Pod or WorkloadEntry with the proxy's IP and the
// services in its namespace whose selector matches it, plus
// ServiceEntries of the proxy's namespace that list the IP as an inline
// endpoint. Sorted by port number, then hostname.
func serviceTargets(snap *index.Snapshot, n *Node) []Instance {
	var out []Instance
	ns, ok := snap.Symbols.Lookup(n.Namespace)
	if !ok {
		return nil
	}
	for _, ip := range n.IPs {
		snap.WorkloadsByAddr(ip, func(w *index.Workload) bool {
			if w.Key.Namespace != ns {
				return true
			}
			for _, id := range snap.ServicesInNamespace(ns) {
				svc := snap.ServiceByID(id)
				if !svc.HasSelector || !snap.Labels.Matches(svc.Selector, w.Labels) {
					continue
				}
				if w.Key.Kind == index.WorkloadPod && svc.Origin != index.OriginKubernetes {
					continue
				}
				out = appendInstances(out, snap, svc, index.Endpoint{Addr: ip, Workload: w.Key.Name, Labels: w.Labels, ServiceAccount: w.ServiceAccount, TLSMode: w.TLSMode})
			}
			return true
		})
	}
	// ServiceEntries with the IP as an inline endpoint.
	for _, id := range snap.ServicesInNamespace(ns) {
		svc := snap.ServiceByID(id)
		if svc.Origin != index.OriginServiceEntry || svc.HasSelector {
			continue
		}
		sh := snap.Endpoints(svc.Key)
		if sh == nil {
			continue
		}
		for _, g := range sh.Groups {
			for _, e := range g.Endpoints {
				if slices.Contains(n.IPs, e.Addr) {
					out = appendInstances(out, snap, svc, e)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Instance) int {
		if c := cmp.Compare(a.Port.Number, b.Port.Number); c != 0 {
			return c
		}
		return cmp.Compare(snap.String(a.Service.Key.Host), snap.String(b.Service.Key.Host))
	})
	return slices.CompactFunc(out, func(a, b Instance) bool {
		return a.Service.Key == b.Service.Key && a.Port == b.Port
	})
}

func appendInstances(out []Instance, snap *index.Snapshot, svc *index.Service, e index.Endpoint) []Instance {
	for _, p := range svc.Ports {
		out = append(out, Instance{Service: svc, Port: p, TargetPort: targetPort(snap, svc, p), Endpoint: e})
	}
	return out
}

// targetPort is the workload port of a service port: the endpoint port of
// the same name in the service's shard, else the numeric targetPort, else
// the service port itself.
func targetPort(snap *index.Snapshot, svc *index.Service, p index.Port) uint32 {
	if sh := snap.Endpoints(svc.Key); sh != nil {
		for _, g := range sh.Groups {
			for _, ep := range g.Ports {
				if ep.Name == p.Name && ep.Port != 0 {
					return ep.Port
				}
			}
		}
	}
	if p.TargetPort != 0 {
		return p.TargetPort
	}
	return p.Number
}

// InstancesKey is the part of the class key that instances contribute.
func InstancesKey(snap *index.Snapshot, in []Instance) string {
	if len(in) == 0 {
		return ""
	}
	var b strings.Builder
	for _, i := range in {
		b.WriteString(snap.String(i.Service.Key.Host))
		b.WriteByte('/')
		b.WriteString(snap.String(i.Service.Key.Namespace))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(uint64(i.Port.Number), 10))
		b.WriteByte('>')
		b.WriteString(strconv.FormatUint(uint64(i.TargetPort), 10))
		b.WriteByte(';')
	}
	return b.String()
}
