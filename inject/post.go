package inject

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"istio.io/api/annotation"
	"istio.io/api/label"
)

// postProcess does what templates cannot: path-parameter envs, metrics
// merging, probe rewriting, the status annotation and container order.
func (j *job) postProcess(pod *corev1.Pod, tmpl *status) error {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if sc := findSidecar(pod); sc != nil && len(j.envs) > 0 {
		setEnvsLast(sc, j.envs)
	}
	if err := j.mergeMetrics(pod); err != nil {
		return err
	}
	securePrometheusPort(pod)
	j.rewriteProbes(pod)
	if nw, ok := j.envs["ISTIO_META_NETWORK"]; ok {
		pod.Labels[label.TopologyNetwork.Name] = nw
	}
	pod.Annotations[annotation.SidecarStatus.Name] = statusOf(tmpl, j.s.Revision)
	for k, v := range j.s.Config.InjectedAnnotations {
		pod.Annotations[k] = v
	}
	j.reorder(pod)
	return nil
}

// setEnvsLast replaces the container's envs named in envs with envs'
// values, appended in name order.
func setEnvsLast(c *corev1.Container, envs map[string]string) {
	kept := make([]corev1.EnvVar, 0, len(c.Env)+len(envs))
	for _, e := range c.Env {
		if _, ok := envs[e.Name]; !ok {
			kept = append(kept, e)
		}
	}
	names := make([]string, 0, len(envs))
	for k := range envs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		kept = append(kept, corev1.EnvVar{Name: k, Value: envs[k]})
	}
	c.Env = kept
}

// statusOf is sidecar.istio.io/status: what the templates injected, so a
// later injection can take it out again, and the revision.
func statusOf(tmpl *status, revision string) string {
	st := *tmpl
	st.Revision = revision
	if st.Revision == "" {
		st.Revision = "default"
	}
	b, err := json.Marshal(st)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// reorder puts the proxy last among containers (so kubectl exec and logs
// default to the application), or first when the application must wait
// for it. As a native sidecar it goes right after istio-init (or
// istio-validation), so other init containers are in the mesh; otherwise
// istio-validation goes first and istio-init last, so that no init
// container's traffic is captured before the proxy runs.
func (j *job) reorder(pod *corev1.Pod) {
	hold := j.pc.GetHoldApplicationUntilProxyStarts().GetValue() ||
		j.s.Values.flag("global", "proxy", "holdApplicationUntilProxyStarts")
	if hold {
		pod.Spec.Containers = moveFirst(pod.Spec.Containers, proxyName)
	} else {
		pod.Spec.Containers = moveLast(pod.Spec.Containers, proxyName)
	}
	if findContainer(pod.Spec.InitContainers, proxyName) != nil {
		for _, n := range []string{coreDumpName, proxyName, validationName, initName} {
			pod.Spec.InitContainers = moveFirst(pod.Spec.InitContainers, n)
		}
		return
	}
	pod.Spec.InitContainers = moveFirst(pod.Spec.InitContainers, validationName)
	pod.Spec.InitContainers = moveLast(pod.Spec.InitContainers, initName)
	pod.Spec.InitContainers = moveLast(pod.Spec.InitContainers, coreDumpName)
}

// moveFirst and moveLast return a new slice (never nil) with the
// container named name moved; without one, the others unchanged.
func moveFirst(cs []corev1.Container, name string) []corev1.Container {
	i := containerIndex(cs, name)
	rest := withoutContainer(cs, name)
	if i < 0 {
		return rest
	}
	return append([]corev1.Container{cs[i]}, rest...)
}

func moveLast(cs []corev1.Container, name string) []corev1.Container {
	i := containerIndex(cs, name)
	rest := withoutContainer(cs, name)
	if i < 0 {
		return rest
	}
	return append(rest, cs[i])
}

// Prometheus annotations are matched as Prometheus reads them: with every
// character outside [a-zA-Z0-9_] as "_" (so prometheus.io/port and
// prometheus-io/port are the same).
const (
	promScrape        = "prometheus_io_scrape"
	promPort          = "prometheus_io_port"
	promPath          = "prometheus_io_path"
	promScrapeTargets = "prometheus_istio_io_scrape_targets"
	promSecurePort    = "prometheus_istio_io_secure_port"
)

func promName(k string) string {
	b := []byte(k)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

func prometheusPort(pod *corev1.Pod) (string, bool) {
	for k, v := range pod.Annotations {
		if promName(k) == promPort {
			return v, true
		}
	}
	return "", false
}

func clearPrometheusAnnotations(pod *corev1.Pod) {
	for k := range pod.Annotations {
		switch promName(k) {
		case promPath, promPort, promScrape, promScrapeTargets:
			delete(pod.Annotations, k)
		}
	}
}

// scrapeTarget and scrapeConfig are ISTIO_PROMETHEUS_ANNOTATIONS, which
// the agent reads to scrape the application for the merged metrics.
type scrapeTarget struct {
	Port string `json:"port"`
	Path string `json:"path"`
}

type scrapeConfig struct {
	Scrape  string         `json:"scrape"`
	Path    string         `json:"path"`
	Port    string         `json:"port"`
	Targets []scrapeTarget `json:"targets,omitempty"`
}

// reservedPorts are the proxy's and agent's own ports: never a scrape
// target of the application.
var reservedPorts = map[string]string{
	"15000": "Envoy admin", "15001": "outbound traffic capture", "15004": "pilot debug",
	"15006": "inbound traffic capture", "15008": "HBONE tunnel", "15020": "pilot-agent status / merged Prometheus",
	"15021": "Envoy health", "15053": "DNS proxy", "15090": "Envoy Prometheus (already merged)",
}

// mergeMetrics points Prometheus at the agent, which merges the
// application's metrics (from the original annotations, handed to it in
// ISTIO_PROMETHEUS_ANNOTATIONS) with Envoy's. Off when the pod says
// prometheus.io/scrape: false, or metrics merging is off (the pod's
// prometheus.istio.io/merge-metrics, else the mesh's
// enablePrometheusMerge, else on). A scrape port that is the agent's own
// or reserved is an error.
func (j *job) mergeMetrics(pod *corev1.Pod) error {
	if !scrapeOn(pod) || !j.mergeOn(pod) {
		return nil
	}
	agent := strconv.Itoa(int(j.s.Mesh.GetDefaultConfig().GetStatusPort()))
	if cur, ok := prometheusPort(pod); ok && cur == agent {
		return nil // re-injected, or the user points at the agent already
	}
	var sc scrapeConfig
	for k, v := range pod.Annotations {
		switch promName(k) {
		case promPort:
			sc.Port = v
		case promScrape:
			sc.Scrape = v
		case promPath:
			sc.Path = v
		case promScrapeTargets:
			sc.Targets, _ = parseScrapeTargets(v) // istiod ignores (logs) targets it cannot read
		}
	}
	check := func(what, port string) error {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: invalid prometheus scrape %s: invalid port %q", ErrAnnotation, what, port)
		}
		canon := strconv.Itoa(n)
		if canon == agent {
			return fmt.Errorf("%w: invalid prometheus scrape %s: port %s conflicts with agent port", ErrAnnotation, what, port)
		}
		if why, ok := reservedPorts[canon]; ok {
			return fmt.Errorf("%w: invalid prometheus scrape %s: port %s is reserved for Istio (%s) and cannot be scraped", ErrAnnotation, what, port, why)
		}
		return nil
	}
	if len(sc.Targets) > 0 {
		sc.Port, sc.Path = sc.Targets[0].Port, sc.Targets[0].Path
		for _, t := range sc.Targets {
			if err := check("targets", t.Port); err != nil {
				return err
			}
		}
	} else if sc.Port != "" {
		if err := check("configuration", sc.Port); err != nil {
			return err
		}
	}
	if c := findSidecar(pod); c != nil && (sc.Scrape != "" || sc.Path != "" || sc.Port != "" || len(sc.Targets) > 0) {
		b, err := json.Marshal(sc)
		if err != nil {
			return err
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: "ISTIO_PROMETHEUS_ANNOTATIONS", Value: string(b)})
	}
	clearPrometheusAnnotations(pod)
	pod.Annotations["prometheus.io/port"] = agent
	pod.Annotations["prometheus.io/path"] = "/stats/prometheus"
	pod.Annotations["prometheus.io/scrape"] = "true"
	return nil
}

// scrapeOn: the pod's prometheus.io/scrape when it is a boolean, else on.
func scrapeOn(pod *corev1.Pod) bool {
	for k, v := range pod.Annotations {
		if promName(k) != promScrape {
			continue
		}
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return true
}

func (j *job) mergeOn(pod *corev1.Pod) bool {
	if v, ok := pod.Annotations[annotation.PrometheusMergeMetrics.Name]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	if m := j.s.Mesh.GetEnablePrometheusMerge(); m != nil {
		return m.Value
	}
	return true
}

// parseScrapeTargets reads "port[:path],..." (path /metrics by default).
func parseScrapeTargets(v string) ([]scrapeTarget, error) {
	var out []scrapeTarget
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		port, path, _ := strings.Cut(e, ":")
		port, path = strings.TrimSpace(port), strings.TrimSpace(path)
		if port == "" {
			return nil, fmt.Errorf("empty port in scrape target %q", e)
		}
		if path == "" {
			path = "/metrics"
		}
		out = append(out, scrapeTarget{Port: port, Path: path})
	}
	return out, nil
}

// securePrometheusPort sets prometheus.istio.io/secure-port from the
// proxy's ENVOY_SECURE_MERGED_METRICS_PORT, unless the pod sets it.
func securePrometheusPort(pod *corev1.Pod) {
	for k := range pod.Annotations {
		if promName(k) == promSecurePort {
			return
		}
	}
	c := findSidecar(pod)
	if c == nil {
		return
	}
	for _, e := range c.Env {
		if e.Name == "ENVOY_SECURE_MERGED_METRICS_PORT" && e.Value != "" && e.Value != "0" {
			pod.Annotations["prometheus.istio.io/secure-port"] = e.Value
			return
		}
	}
}
