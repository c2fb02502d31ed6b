package ingest

import (
	"net/netip"
	"strings"
	"unsafe"

	"github.com/pilotfish-mesh/pilotfish/index"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

const (
	labelServiceName = "kubernetes.io/service-name"
	labelTLSMode     = "security.istio.io/tlsMode"
	labelNetwork     = "topology.istio.io/network"
)

func (c *Converter) namespace(b *index.Batch, o *Object) []rowRef {
	name := c.sym(o.Meta.Name)
	b.PutNamespace(index.Namespace{Name: name, Labels: c.labelSet(o.Meta.Labels)})
	return c.oneRef(namespaceRef(name))
}

func (c *Converter) service(b *index.Batch, o *Object) []rowRef {
	svc := o.Spec.(*corev1.Service)
	ns := o.Meta.Namespace
	key := index.ServiceKey{Host: c.sym(o.Meta.Name + "." + ns + ".svc." + c.domain), Namespace: c.sym(ns)}
	row := index.Service{
		Key:    key,
		Name:   c.sym(o.Meta.Name),
		Origin: index.OriginKubernetes,
		Labels: c.labelSet(o.Meta.Labels),
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if p, ok := parsePrefix(ip); ok {
			row.Addresses = append(row.Addresses, p)
		}
	}
	for _, p := range svc.Spec.Ports {
		port := index.Port{Name: c.sym(p.Name), Number: uint32(p.Port), Protocol: kubeProtocol(p)}
		if p.TargetPort.IntVal > 0 {
			port.TargetPort = uint32(p.TargetPort.IntVal)
		}
		row.Ports = append(row.Ports, port)
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		row.Resolution = index.ResolutionDNS
		row.ExternalName = c.sym(svc.Spec.ExternalName)
		row.MeshExternal = true
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		row.Resolution = index.ResolutionPassthrough
	}
	if svc.Spec.Selector != nil {
		row.HasSelector = true
		row.Selector = c.labelSet(svc.Spec.Selector)
	}
	row.ExportTo = c.exportTo(splitList(o.Meta.Annotations[annotationExport])) // none: Unset
	b.PutService(row)
	return c.oneRef(serviceRef(key))
}

// kubeProtocol follows Istio's protocol selection for Kubernetes ports:
// appProtocol first, then the port name's prefix; UDP and SCTP by protocol.
func kubeProtocol(p corev1.ServicePort) index.Protocol {
	if p.Protocol == corev1.ProtocolUDP {
		return index.ProtocolUDP
	}
	if p.AppProtocol != nil {
		switch *p.AppProtocol {
		case "kubernetes.io/h2c":
			return index.ProtocolHTTP2
		case "kubernetes.io/ws", "kubernetes.io/wss":
			return index.ProtocolHTTP
		}
		if pr := protocolOf(*p.AppProtocol); pr != index.ProtocolUnknown {
			return pr
		}
	}
	return protocolOf(p.Name)
}

func (c *Converter) endpointSlice(b *index.Batch, o *Object) []rowRef {
	es := o.Spec.(*discoveryv1.EndpointSlice)
	svcName := o.Meta.Labels[labelServiceName]
	if svcName == "" || es.AddressType == discoveryv1.AddressTypeFQDN {
		return nil
	}
	ns := o.Meta.Namespace
	key := index.ServiceKey{Host: c.sym(svcName + "." + ns + ".svc." + c.domain), Namespace: c.sym(ns)}
	// Pods: labels and identity come from the Pod with each address; the
	// targetRef's name is not kept (a per-endpoint string would double the
	// endpoint's memory).
	g := index.EndpointGroup{Source: c.sym(o.Meta.Name), Pods: true}
	for _, p := range es.Ports {
		ep := index.EndpointPort{}
		if p.Name != nil {
			ep.Name = c.sym(*p.Name)
		}
		if p.Port != nil {
			ep.Port = uint32(*p.Port)
		}
		if p.AppProtocol != nil {
			ep.Protocol = protocolOf(*p.AppProtocol)
		}
		g.Ports = append(g.Ports, ep)
	}
	n := 0
	for _, e := range es.Endpoints {
		n += len(e.Addresses)
	}
	g.Endpoints = make([]index.Endpoint, 0, n) // exact: rows are the bulk of the heap
	for _, e := range es.Endpoints {
		row := index.Endpoint{Health: endpointHealth(e.Conditions)}
		row.Locality = c.localitySym(e.NodeName, e.Zone)
		for _, a := range e.Addresses {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				continue // validation reports it
			}
			row.Addr = addr
			g.Endpoints = append(g.Endpoints, row)
		}
	}
	b.PutEndpoints(key, g)
	return c.oneRef(endpointsRef(key, g.Source))
}

// endpointHealth maps EndpointSlice conditions: ready serves; terminating
// but serving drains; anything else is unhealthy.
func endpointHealth(c discoveryv1.EndpointConditions) index.Health {
	switch {
	case c.Ready == nil || *c.Ready:
		return index.HealthHealthy
	case c.Serving != nil && *c.Serving && c.Terminating != nil && *c.Terminating:
		return index.HealthDraining
	default:
		return index.HealthUnhealthy
	}
}

func (c *Converter) pod(b *index.Batch, o *Object) []rowRef {
	pod := o.Spec.(*corev1.Pod)
	key := index.WorkloadKey{Kind: index.WorkloadPod, Namespace: c.sym(o.Meta.Namespace), Name: c.sym(o.Meta.Name)}
	w := index.Workload{
		Key:            key,
		Labels:         c.labelSet(o.Meta.Labels),
		ServiceAccount: c.sym(pod.Spec.ServiceAccountName),
		Node:           c.sym(pod.Spec.NodeName),
		Network:        c.sym(o.Meta.Labels[labelNetwork]),
	}
	if loc := c.nodes[pod.Spec.NodeName]; loc != "" {
		w.Locality = c.sym(loc)
	}
	if a, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
		w.Addr = a
	}
	if o.Meta.Labels[labelTLSMode] == "istio" || o.Meta.Annotations[annotationStatus] != "" {
		w.TLSMode = index.TLSModeIstio
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			w.Ready = cond.Status == corev1.ConditionTrue
		}
	}
	b.PutWorkload(w)
	return c.oneRef(workloadRef(key))
}

// splitList splits a comma-separated annotation value, trimming spaces.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// localitySym interns an endpoint's locality (endpointLocality). Most
// endpoints name a zone and no Node the converter knows: their "/zone" is
// built in a reused buffer and only looked up (Intern copies a string only
// when it is new), instead of a string allocated per endpoint.
func (c *Converter) localitySym(nodeName, zone *string) index.Sym {
	if zone != nil && *zone != "" {
		if _, known := c.nodes[ptrString(nodeName)]; nodeName == nil || !known {
			c.locBuf = append(append(c.locBuf[:0], '/'), *zone...)
			return c.sym(unsafe.String(unsafe.SliceData(c.locBuf), len(c.locBuf)))
		}
	}
	if loc := c.endpointLocality(nodeName, zone); loc != "" {
		return c.sym(loc)
	}
	return 0
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
