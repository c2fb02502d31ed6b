package ingest

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// The Kubernetes kinds: the API server's rules for the fields pilotfish
// reads (ports, addresses, selectors), not the whole of its validation.

// serviceNameLabel ties an EndpointSlice to its Service.
const serviceNameLabel = "kubernetes.io/service-name"

func (v *validator) service(svc *corev1.Service) {
	var root *fieldPath
	p := root.f("spec")
	s := &svc.Spec
	switch s.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(s.Ports) == 0 && s.ClusterIP != corev1.ClusterIPNone {
			v.errorf(p.f("ports"), "at least one port is required (except for headless Services, clusterIP: None)")
		}
	case corev1.ServiceTypeExternalName:
		name := strings.TrimSuffix(s.ExternalName, ".")
		if name == "" {
			v.errorf(p.f("externalName"), "required for type ExternalName")
		} else if errs := kvalidation.IsDNS1123Subdomain(name); len(errs) > 0 {
			v.errorf(p.f("externalName"), "invalid name %q: must be a DNS-1123 subdomain (%s)", s.ExternalName, kubeMessage(errs))
		}
	default:
		v.errorf(p.f("type"), "unsupported type %q, want ClusterIP, NodePort, LoadBalancer or ExternalName", s.Type)
	}
	names := map[string]int{}
	type portKey struct {
		port     int32
		protocol corev1.Protocol
	}
	ports := map[portKey]int{}
	for i, port := range s.Ports {
		pp := p.f("ports").i(i)
		switch {
		case port.Name == "" && len(s.Ports) > 1:
			v.errorf(pp.f("name"), "required when a Service has more than one port")
		case port.Name != "":
			if errs := kvalidation.IsDNS1123Label(port.Name); len(errs) > 0 {
				v.errorf(pp.f("name"), "invalid port name %q: %s", port.Name, kubeMessage(errs))
			} else if j, dup := names[port.Name]; dup {
				v.errorf(pp.f("name"), "duplicate port name %q (also ports[%d])", port.Name, j)
			}
			names[port.Name] = i
		}
		v.port(pp.f("port"), int64(port.Port))
		v.kubeProtocol(pp.f("protocol"), port.Protocol)
		proto := port.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if j, dup := ports[portKey{port.Port, proto}]; dup {
			v.errorf(pp.f("port"), "duplicate port %d/%s (also ports[%d])", port.Port, proto, j)
		}
		ports[portKey{port.Port, proto}] = i
		v.targetPort(pp.f("targetPort"), port.TargetPort)
		if port.NodePort != 0 {
			if s.Type != corev1.ServiceTypeNodePort && s.Type != corev1.ServiceTypeLoadBalancer {
				v.errorf(pp.f("nodePort"), "only allowed for type NodePort or LoadBalancer")
			} else {
				v.port(pp.f("nodePort"), int64(port.NodePort))
			}
		}
	}
	v.labels(p.f("selector"), s.Selector)
	if ip := s.ClusterIP; ip != "" && ip != corev1.ClusterIPNone && !isIP(ip) {
		v.errorf(p.f("clusterIP"), "%q is not an IP address or \"None\"", ip)
	}
	for i, ip := range s.ClusterIPs {
		if ip != corev1.ClusterIPNone && !isIP(ip) {
			v.errorf(p.f("clusterIPs").i(i), "%q is not an IP address or \"None\"", ip)
		}
	}
	for i, ip := range s.ExternalIPs {
		if !isIP(ip) {
			v.errorf(p.f("externalIPs").i(i), "%q is not an IP address", ip)
		}
	}
	switch s.SessionAffinity {
	case "", corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		v.errorf(p.f("sessionAffinity"), "unsupported value %q, want None or ClientIP", s.SessionAffinity)
	}
	switch s.ExternalTrafficPolicy {
	case "", corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal:
	default:
		v.errorf(p.f("externalTrafficPolicy"), "unsupported value %q, want Cluster or Local", s.ExternalTrafficPolicy)
	}
	if itp := s.InternalTrafficPolicy; itp != nil && *itp != corev1.ServiceInternalTrafficPolicyCluster && *itp != corev1.ServiceInternalTrafficPolicyLocal {
		v.errorf(p.f("internalTrafficPolicy"), "unsupported value %q, want Cluster or Local", *itp)
	}
	for i, f := range s.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			v.errorf(p.f("ipFamilies").i(i), "unsupported value %q, want IPv4 or IPv6", f)
		}
	}
}

func (v *validator) kubeProtocol(p *fieldPath, proto corev1.Protocol) {
	switch proto {
	case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
	default:
		v.errorf(p, "unsupported protocol %q, want TCP, UDP or SCTP", proto)
	}
}

// targetPort is a port number or the name of a container port (an IANA
// service name); 0 means "same as port".
func (v *validator) targetPort(p *fieldPath, tp intstr.IntOrString) {
	switch {
	case tp.Type == intstr.Int && tp.IntVal != 0:
		v.port(p, int64(tp.IntVal))
	case tp.Type == intstr.String:
		if errs := kvalidation.IsValidPortName(tp.StrVal); len(errs) > 0 {
			v.errorf(p, "invalid port name %q: %s", tp.StrVal, kubeMessage(errs))
		}
	}
}

func (v *validator) endpointSlice(es *discoveryv1.EndpointSlice) {
	var root *fieldPath
	if es.Labels[serviceNameLabel] == "" {
		v.errorf(root.f("metadata").f("labels"), "label %q is required: it names the Service the endpoints belong to", serviceNameLabel)
	}
	check := func(string) string { return "" }
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4:
		check = func(a string) string {
			if ip, err := netip.ParseAddr(a); err != nil || !ip.Is4() {
				return "is not an IPv4 address"
			}
			return ""
		}
	case discoveryv1.AddressTypeIPv6:
		check = func(a string) string {
			if ip, err := netip.ParseAddr(a); err != nil || !ip.Is6() || ip.Is4In6() {
				return "is not an IPv6 address"
			}
			return ""
		}
	case discoveryv1.AddressTypeFQDN:
		check = func(a string) string {
			if errs := kvalidation.IsDNS1123Subdomain(a); len(errs) > 0 {
				return "is not a DNS-1123 subdomain"
			}
			return ""
		}
	case "":
		v.errorf(root.f("addressType"), "required: IPv4, IPv6 or FQDN")
	default:
		v.errorf(root.f("addressType"), "unsupported value %q, want IPv4, IPv6 or FQDN", es.AddressType)
	}
	if len(es.Endpoints) > 1000 {
		v.errorf(root.f("endpoints"), "at most 1000 endpoints, not %d", len(es.Endpoints))
	}
	for i, ep := range es.Endpoints {
		p := root.f("endpoints").i(i)
		switch n := len(ep.Addresses); {
		case n == 0:
			v.errorf(p.f("addresses"), "at least one address is required")
		case n > 100:
			v.errorf(p.f("addresses"), "at most 100 addresses, not %d", n)
		}
		for j, a := range ep.Addresses {
			if msg := check(a); msg != "" {
				v.errorf(p.f("addresses").i(j), "%q %s (addressType %s)", a, msg, es.AddressType)
			}
		}
		if ep.Hostname != nil {
			if errs := kvalidation.IsDNS1123Label(*ep.Hostname); len(errs) > 0 {
				v.errorf(p.f("hostname"), "invalid hostname %q: %s", *ep.Hostname, kubeMessage(errs))
			}
		}
		if ep.NodeName != nil {
			if errs := kvalidation.IsDNS1123Subdomain(*ep.NodeName); len(errs) > 0 {
				v.errorf(p.f("nodeName"), "invalid node name %q: %s", *ep.NodeName, kubeMessage(errs))
			}
		}
	}
	if len(es.Ports) > 100 {
		v.errorf(root.f("ports"), "at most 100 ports, not %d", len(es.Ports))
	}
	names := map[string]int{}
	for i, port := range es.Ports {
		p := root.f("ports").i(i)
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			if errs := kvalidation.IsDNS1123Label(name); len(errs) > 0 {
				v.errorf(p.f("name"), "invalid port name %q: %s", name, kubeMessage(errs))
			}
		}
		if j, dup := names[name]; dup {
			v.errorf(p.f("name"), "duplicate port name %q (also ports[%d])", name, j)
		}
		names[name] = i
		if port.Port != nil {
			v.port(p.f("port"), int64(*port.Port))
		}
		if port.Protocol != nil {
			v.kubeProtocol(p.f("protocol"), *port.Protocol)
		}
	}
}

func (v *validator) pod(pod *corev1.Pod) {
	var root *fieldPath
	st := root.f("status")
	if ip := pod.Status.PodIP; ip != "" && !isIP(ip) {
		v.errorf(st.f("podIP"), "%q is not an IP address", ip)
	}
	for i, ip := range pod.Status.PodIPs {
		if !isIP(ip.IP) {
			v.errorf(st.f("podIPs").i(i).f("ip"), "%q is not an IP address", ip.IP)
		}
	}
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIP != "" && pod.Status.PodIPs[0].IP != pod.Status.PodIP {
		v.errorf(st.f("podIPs").i(0).f("ip"), "must equal podIP %q", pod.Status.PodIP)
	}
	if ip := pod.Status.HostIP; ip != "" && !isIP(ip) {
		v.errorf(st.f("hostIP"), "%q is not an IP address", ip)
	}
	names := map[string]bool{}
	containers := func(p *fieldPath, cs []corev1.Container) {
		for i, c := range cs {
			for j, port := range c.Ports {
				pp := p.i(i).f("ports").i(j)
				v.port(pp.f("containerPort"), int64(port.ContainerPort))
				if port.HostPort != 0 {
					v.port(pp.f("hostPort"), int64(port.HostPort))
				}
				v.kubeProtocol(pp.f("protocol"), port.Protocol)
				if port.Name == "" {
					continue
				}
				if errs := kvalidation.IsValidPortName(port.Name); len(errs) > 0 {
					v.errorf(pp.f("name"), "invalid port name %q: %s", port.Name, kubeMessage(errs))
				} else if names[port.Name] {
					v.errorf(pp.f("name"), "duplicate port name %q in the Pod", port.Name)
				}
				names[port.Name] = true
			}
		}
	}
	containers(root.f("spec").f("initContainers"), pod.Spec.InitContainers)
	containers(root.f("spec").f("containers"), pod.Spec.Containers)
}
