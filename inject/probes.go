package inject

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"istio.io/api/annotation"
)

// With mTLS the kubelet cannot reach an application's probes through the
// proxy, so they are rewritten to the agent's status port
// (/app-health/<container>/readyz and the like), and the originals go to
// the agent in ISTIO_KUBE_APP_PROBERS. HTTP, TCP and gRPC probes and HTTP
// and TCP lifecycle hooks are rewritten; exec ones are left alone.

// prober is one original probe in ISTIO_KUBE_APP_PROBERS.
type prober struct {
	HTTPGet        *corev1.HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket      *corev1.TCPSocketAction `json:"tcpSocket,omitempty"`
	GRPC           *corev1.GRPCAction      `json:"grpc,omitempty"`
	TimeoutSeconds int32                   `json:"timeoutSeconds,omitempty"`
}

func probeURLs(container string) (ready, live, startup, preStop, postStart string) {
	return "/app-health/" + container + "/readyz", "/app-health/" + container + "/livez",
		"/app-health/" + container + "/startupz", "/app-lifecycle/" + container + "/prestopz",
		"/app-lifecycle/" + container + "/poststartz"
}

// rewriteProbes rewrites the application's probes when the pod's
// sidecar.istio.io/rewriteAppHTTPProbers (a boolean) or else the values'
// sidecarInjectorWebhook.rewriteAppHTTPProbe says so.
func (j *job) rewriteProbes(pod *corev1.Pod) {
	sc := findSidecar(pod)
	if sc == nil {
		return
	}
	on := j.s.Values.flag("sidecarInjectorWebhook", "rewriteAppHTTPProbe")
	if v, ok := pod.Annotations[annotation.SidecarRewriteAppHTTPProbers.Name]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			on = b
		}
	}
	if !on {
		return
	}
	agentPort := j.s.Mesh.GetDefaultConfig().GetStatusPort()
	if probers := dumpProbers(pod, agentPort); probers != "" {
		_, again := pod.Annotations[annotation.SidecarStatus.Name]
		sc.Env = mergeProbersEnv(again, sc.Env, probers)
	}
	port := int(agentPort)
	if v, ok := pod.Annotations[annotation.SidecarStatusPort.Name]; ok {
		port, _ = strconv.Atoi(v) // validated before injection
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name != proxyName {
				rewriteContainerProbes(&cs[i], port)
			}
		}
	}
}

// dumpProbers is the JSON of the probes to hand the agent (named ports
// resolved, probes already on the agent's port skipped); "" when none.
func dumpProbers(pod *corev1.Pod, agentPort int32) string {
	out := map[string]*prober{}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i := range all {
		c := &all[i]
		if c.Name == proxyName {
			continue
		}
		named := map[string]int32{}
		for _, p := range c.Ports {
			if p.Name != "" {
				named[p.Name] = p.ContainerPort
			}
		}
		ready, live, startup, preStop, postStart := probeURLs(c.Name)
		add := func(url string, p *prober) {
			if p = resolvePort(p, named, agentPort); p != nil {
				out[url] = p
			}
		}
		add(ready, fromProbe(c.ReadinessProbe))
		add(live, fromProbe(c.LivenessProbe))
		add(startup, fromProbe(c.StartupProbe))
		if c.Lifecycle != nil {
			add(preStop, fromHandler(c.Lifecycle.PreStop))
			add(postStart, fromHandler(c.Lifecycle.PostStart))
		}
	}
	if len(out) == 0 {
		return ""
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

func fromProbe(p *corev1.Probe) *prober {
	switch {
	case p == nil:
		return nil
	case p.HTTPGet != nil:
		return &prober{HTTPGet: p.HTTPGet.DeepCopy(), TimeoutSeconds: p.TimeoutSeconds}
	case p.TCPSocket != nil:
		return &prober{TCPSocket: p.TCPSocket.DeepCopy(), TimeoutSeconds: p.TimeoutSeconds}
	case p.GRPC != nil:
		return &prober{GRPC: p.GRPC.DeepCopy(), TimeoutSeconds: p.TimeoutSeconds}
	}
	return nil
}

func fromHandler(h *corev1.LifecycleHandler) *prober {
	switch {
	case h == nil:
		return nil
	case h.HTTPGet != nil:
		return &prober{HTTPGet: h.HTTPGet.DeepCopy()}
	case h.TCPSocket != nil:
		return &prober{TCPSocket: h.TCPSocket.DeepCopy()}
	}
	return nil
}

// resolvePort turns a named port into its number (nil when the container
// has no such port) and drops a probe already on the agent's port.
func resolvePort(p *prober, named map[string]int32, agentPort int32) *prober {
	if p == nil || p.GRPC != nil {
		return p
	}
	var port *intstr.IntOrString
	switch {
	case p.HTTPGet != nil:
		port = &p.HTTPGet.Port
	case p.TCPSocket != nil:
		port = &p.TCPSocket.Port
	default:
		return nil
	}
	if port.Type == intstr.String {
		n, ok := named[port.StrVal]
		if !ok {
			return nil
		}
		*port = intstr.FromInt32(n)
	} else if port.IntVal == agentPort {
		return nil
	}
	return p
}

// mergeProbersEnv sets ISTIO_KUBE_APP_PROBERS; on re-injection the
// probes recorded last time are kept (they win), since the pod's probes
// now point at the agent.
func mergeProbersEnv(again bool, env []corev1.EnvVar, probers string) []corev1.EnvVar {
	const name = "ISTIO_KUBE_APP_PROBERS"
	if again {
		for i, e := range env {
			if e.Name != name {
				continue
			}
			var old, cur map[string]*prober
			if json.Unmarshal([]byte(e.Value), &old) != nil || json.Unmarshal([]byte(probers), &cur) != nil {
				return env
			}
			for k, v := range old {
				cur[k] = v
			}
			b, err := json.Marshal(cur)
			if err != nil {
				return env
			}
			env[i] = corev1.EnvVar{Name: name, Value: string(b)}
			return env
		}
	}
	return append(env, corev1.EnvVar{Name: name, Value: probers})
}

// rewriteContainerProbes points the container's HTTP, TCP and gRPC probes
// and HTTP and TCP lifecycle hooks at the agent.
func rewriteContainerProbes(c *corev1.Container, port int) {
	ready, live, startup, preStop, postStart := probeURLs(c.Name)
	c.ReadinessProbe = rewriteProbe(c.ReadinessProbe, ready, port)
	c.LivenessProbe = rewriteProbe(c.LivenessProbe, live, port)
	c.StartupProbe = rewriteProbe(c.StartupProbe, startup, port)
	if c.Lifecycle != nil {
		c.Lifecycle.PreStop = rewriteHandler(c.Lifecycle.PreStop, preStop, port)
		c.Lifecycle.PostStart = rewriteHandler(c.Lifecycle.PostStart, postStart, port)
	}
}

func toAgent(a *corev1.HTTPGetAction, url string, port int) {
	a.Port = intstr.FromInt32(int32(port))
	a.Path = url
	if a.Scheme == corev1.URISchemeHTTPS { // the agent speaks HTTPS to the application itself
		a.Scheme = corev1.URISchemeHTTP
	}
}

func rewriteProbe(p *corev1.Probe, url string, port int) *corev1.Probe {
	if p == nil {
		return nil
	}
	switch {
	case p.HTTPGet != nil:
		p = p.DeepCopy()
	case p.TCPSocket != nil:
		p = p.DeepCopy()
		p.HTTPGet, p.TCPSocket = &corev1.HTTPGetAction{}, nil
	case p.GRPC != nil:
		p = p.DeepCopy()
		p.HTTPGet, p.GRPC = &corev1.HTTPGetAction{}, nil
	default:
		return p
	}
	toAgent(p.HTTPGet, url, port)
	return p
}

func rewriteHandler(h *corev1.LifecycleHandler, url string, port int) *corev1.LifecycleHandler {
	if h == nil {
		return nil
	}
	switch {
	case h.HTTPGet != nil:
		h = h.DeepCopy()
	case h.TCPSocket != nil:
		h = h.DeepCopy()
		h.HTTPGet, h.TCPSocket = &corev1.HTTPGetAction{}, nil
	default:
		return h
	}
	toAgent(h.HTTPGet, url, port)
	return h
}
