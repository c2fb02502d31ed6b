package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"istio.io/api/annotation"
	"istio.io/api/label"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// The names the injector gives and looks for.
const (
	proxyName      = "istio-proxy"
	initName       = "istio-init"
	validationName = "istio-validation"
	coreDumpName   = "enable-core-dump"
	// autoImage on a user's istio-proxy container means "the injected
	// image" (a container must name one).
	autoImage = "auto"
)

// TemplateData is what a template sees as ".": the fields and their
// types are istiod's (SidecarTemplateData), since templates written for
// istiod address them by name.
type TemplateData struct {
	TypeMeta                 metav1.TypeMeta
	DeploymentMeta           types.NamespacedName
	ObjectMeta               metav1.ObjectMeta
	Spec                     corev1.PodSpec
	ProxyConfig              *meshconfig.ProxyConfig
	MeshConfig               *meshconfig.MeshConfig
	Values                   map[string]any
	Revision                 string
	NativeSidecars           bool
	ProxyImage               string
	ProxyInitImage           string
	ProxyUID                 int64
	ProxyGID                 int64
	InboundTrafficPolicyMode string
	CompliancePolicy         string
}

// job is one injection in progress.
type job struct {
	st        *state
	s         *Settings   // st.s
	pod       *corev1.Pod // the input (namespace filled in); never modified
	owner     types.NamespacedName
	ownerType metav1.TypeMeta
	envs      map[string]string // proxy env overrides (cluster, network, path parameters)
	pc        *meshconfig.ProxyConfig
	used      overrides // the pod's own definitions of injected containers, merged by render
}

// run renders the templates over the pod and post-processes the result.
func (j *job) run() (*corev1.Pod, error) {
	if err := j.prepare(); err != nil {
		return nil, err
	}
	merged, tmpl, err := j.render()
	if err != nil {
		return nil, err
	}
	if err := j.recordUserContainers(merged, j.used); err != nil {
		return nil, err
	}
	if err := j.postProcess(merged, tmpl); err != nil {
		return nil, err
	}
	return merged, nil
}

// prepare checks the pod's annotations and settles the proxy config and
// the proxy's cluster and network.
func (j *job) prepare() error {
	if err := validateAnnotations(j.pod.Annotations); err != nil {
		return err
	}
	j.pc = j.s.Mesh.GetDefaultConfig()
	if j.pc == nil {
		j.pc = defaultProxyConfig()
	}
	if v, ok := j.pod.Annotations[annotation.ProxyConfig.Name]; ok {
		pc, err := mergeProxyConfig(j.pc, []byte(v))
		if err != nil { // validateAnnotations parsed it already
			return fmt.Errorf("%w: %s: %v", ErrAnnotation, annotation.ProxyConfig.Name, err)
		}
		j.pc = pc
	}
	j.clusterAndNetwork()
	return nil
}

// clusterAndNetwork fills the proxy's cluster and network envs: the
// values', then the path parameters', then the pod's network label.
func (j *job) clusterAndNetwork() {
	cluster := j.s.Values.str("global", "multiCluster", "clusterName")
	network := j.s.Values.str("global", "network")
	if v := j.envs["ISTIO_META_CLUSTER_ID"]; v != "" {
		cluster = v
	}
	if v := j.envs["ISTIO_META_NETWORK"]; v != "" {
		network = v
	}
	if v, ok := j.pod.Labels[label.TopologyNetwork.Name]; ok {
		network = v
	}
	if cluster != "" {
		j.envs["ISTIO_META_CLUSTER_ID"] = cluster
	}
	if network != "" {
		j.envs["ISTIO_META_NETWORK"] = network
	}
}

// render runs the selected templates in order. Each is merged
// (strategic merge, as kubectl patches) over the pod so far, and over the
// templates-only pod that says what was injected.
// tmpl names what the templates alone rendered (the sidecar.istio.io/status
// record).
func (j *job) render() (merged *corev1.Pod, tmpl *status, err error) {
	data, err := j.templateData()
	if err != nil {
		return nil, nil, err
	}
	// The pod is merged in its JSON form (one conversion each way, not
	// one per template), numbers as float64 as in the templates' YAML (a
	// list merged by a number, such as ports by containerPort, matches
	// across both).
	text, err := json.Marshal(j.pod)
	if err != nil {
		return nil, nil, err
	}
	from, err := decodeJSONFloats(text)
	if err != nil {
		return nil, nil, err
	}
	// tm, the templates-only pod, is only built when a second template
	// is merged: what a single template injects is cached with it.
	cur, ok := from.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("%w: not an object", ErrPod)
	}
	var tm map[string]any
	var single *overlay
	var user []map[string]any
	buf := renderBuffers.Get().(*bytes.Buffer)
	defer putRenderBuffer(buf)
	names := j.templateNames()
	for i, name := range names {
		t, ok := j.st.template(name)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q not found; have %s", ErrTemplate, name, strings.Join(j.s.Config.names, ", "))
		}
		buf.Reset()
		if err := t.Execute(buf, data); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrTemplate, err)
		}
		ov, err := j.s.Config.overlays.parse(buf.Bytes())
		if err != nil {
			return nil, nil, fmt.Errorf("%w: template %q rendered invalid YAML: %v", ErrTemplate, name, err)
		}
		// The merge consumes its patch (it drops nulls as it applies
		// them) and the parsed overlay is shared: each merge gets a copy.
		var proxyInit bool
		if tm == nil && single == nil && ov.names != nil {
			single, proxyInit = ov, ov.proxyInit
		} else {
			if tm == nil {
				tm = map[string]any{}
				if single != nil {
					if tm, err = mergeMap(tm, single.m); err != nil {
						return nil, nil, fmt.Errorf("%w: template %q: %v", ErrTemplate, name, err)
					}
					single = nil
				}
			}
			if tm, err = mergeMap(tm, ov.m); err != nil {
				return nil, nil, fmt.Errorf("%w: template %q: %v", ErrTemplate, name, err)
			}
			proxyInit = jsonContainer(tm, "initContainers", proxyName) >= 0
		}
		// With native sidecars the template puts the proxy among the
		// init containers; a user's customised istio-proxy in containers
		// follows it there before the merge.
		if proxyInit && j.nativeAnnotation(jsonAnnotation(cur, "sidecar.istio.io/nativeSidecar")) {
			moveJSONContainer(cur, proxyName)
		}
		if i == len(names)-1 { // the pod's own definitions of what the templates inject go over them
			if user, j.used, err = j.userContainers(injectedSoFar(single, tm)); err != nil {
				return nil, nil, err
			}
		}
		// The merge writes into what it takes from its patch (strategic
		// merge patch re-assigns every entry of a subtree it takes whole,
		// and drops nulls): the cached overlay is copied for each.
		if cur, err = mergeMap(cur, ov.m); err != nil {
			return nil, nil, fmt.Errorf("%w: template %q: %v", ErrTemplate, name, err)
		}
	}
	for _, u := range user {
		if cur, err = strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(cur, u, podPatchMeta); err != nil {
			return nil, nil, fmt.Errorf("%w: applying the pod's own containers: %v", ErrPod, err)
		}
	}
	if merged, err = podFromJSON(cur); err != nil {
		return nil, nil, fmt.Errorf("%w: templates merged into an invalid pod: %v", ErrTemplate, err)
	}
	return merged, injectedSoFar(single, tm), nil
}

// injectedSoFar names what the templates merged so far inject: the
// single one's cached names, or those of the templates-only pod.
func injectedSoFar(single *overlay, tm map[string]any) *status {
	switch {
	case single != nil:
		return single.names
	case tm != nil:
		return injectedNames(tm)
	}
	return &status{}
}

// renderBuffers hold templates' output (about 20 KiB for the chart's
// sidecar) across injections; what is parsed from it is copied.
var renderBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putRenderBuffer returns b to the pool unless it grew past what a
// template usually renders.
func putRenderBuffer(b *bytes.Buffer) {
	if b.Cap() <= 256<<10 {
		b.Reset()
		renderBuffers.Put(b)
	}
}

// templateData is what the templates see: the pod as strippedPod makes
// it; the settings' fields are those the templates were folded over.
func (j *job) templateData() (*TemplateData, error) {
	stripped, err := j.strippedPod()
	if err != nil {
		return nil, err
	}
	data := new(TemplateData)
	*data = j.st.data
	data.TypeMeta, data.DeploymentMeta = j.ownerType, j.owner
	data.ObjectMeta, data.Spec = stripped.ObjectMeta, stripped.Spec
	data.ProxyConfig = j.pc
	data.ProxyImage = j.proxyImage(stripped.Annotations)
	data.ProxyInitImage = j.proxyInitImage(stripped.Annotations)
	return data, nil
}

// nativeAnnotation: the pod's sidecar.istio.io/nativeSidecar v, else the
// setting.
func (j *job) nativeAnnotation(v string) bool {
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	return j.s.NativeSidecars
}

// templateNames: inject.istio.io/templates, else the defaults, with
// aliases expanded one level.
func (j *job) templateNames() []string {
	names := j.s.Config.DefaultTemplates
	if v, ok := j.pod.Annotations[annotation.InjectTemplates.Name]; ok {
		names = nil
		for _, n := range strings.Split(v, ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if a, ok := j.s.Config.Aliases[n]; ok {
			out = append(out, a...)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// strippedPod is what templates see: on re-injection the pod without
// what the last injection added (so the result does not depend on how
// often a pod was injected), plus the user's overrides it recorded.
func (j *job) strippedPod() (*corev1.Pod, error) {
	pod := j.pod
	if st, ok := parseStatus(pod.Annotations[annotation.SidecarStatus.Name]); ok {
		pod = pod.DeepCopy()
		for _, n := range st.Containers {
			pod.Spec.Containers = withoutContainer(pod.Spec.Containers, n)
		}
		for _, n := range st.InitContainers {
			pod.Spec.InitContainers = withoutContainer(pod.Spec.InitContainers, n)
		}
		if port, ok := prometheusPort(pod); ok && port == fmt.Sprint(j.s.Mesh.GetDefaultConfig().GetStatusPort()) {
			clearPrometheusAnnotations(pod)
		}
		delete(pod.Annotations, annotation.SidecarStatus.Name)
	}
	ov, err := parseOverrides(pod.Annotations)
	if err != nil {
		return nil, err
	}
	if len(ov.Containers)+len(ov.InitContainers) == 0 {
		return pod, nil
	}
	if pod == j.pod {
		pod = pod.DeepCopy()
	}
	for _, c := range ov.Containers {
		if findContainer(pod.Spec.Containers, c.Name) == nil {
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
	}
	for _, c := range ov.InitContainers {
		if findContainer(pod.Spec.InitContainers, c.Name) == nil {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		}
	}
	return pod, nil
}

// status is the sidecar.istio.io/status annotation.
type status struct {
	InitContainers   []string `json:"initContainers"`
	Containers       []string `json:"containers"`
	Volumes          []string `json:"volumes"`
	ImagePullSecrets []string `json:"imagePullSecrets"`
	Revision         string   `json:"revision"`
}

func parseStatus(v string) (status, bool) {
	var st status
	if v == "" || json.Unmarshal([]byte(v), &st) != nil {
		return status{}, false
	}
	return st, true
}

// overrides is the proxy.istio.io/overrides annotation: the user's own
// definitions of injected containers, recorded at first injection.
type overrides struct {
	Containers     []corev1.Container `json:"containers,omitempty"`
	InitContainers []corev1.Container `json:"initContainers,omitempty"`
}

func parseOverrides(ann map[string]string) (overrides, error) {
	var ov overrides
	v, ok := ann[annotation.ProxyOverrides.Name]
	if !ok {
		return ov, nil
	}
	if err := json.Unmarshal([]byte(v), &ov); err != nil {
		return ov, fmt.Errorf("%w: %s: %v", ErrAnnotation, annotation.ProxyOverrides.Name, err)
	}
	return ov, nil
}

// proxyImage is hub/image:tag with the image type (proxy config, else the
// values' variant, else the pod's sidecar.istio.io/proxyImageType).
func (j *job) proxyImage(ann map[string]string) string {
	name := j.s.Values.str("global", "proxy", "image")
	if name == "" {
		name = "proxyv2"
	}
	typ := ""
	if img := j.pc.GetImage(); img != nil {
		typ = img.ImageType
	}
	return j.imageURL(name, typ, ann)
}

func (j *job) proxyInitImage(ann map[string]string) string {
	name := j.s.Values.str("global", "proxy_init", "image")
	if name == "" {
		name = "proxyv2"
	}
	return j.imageURL(name, "", ann)
}

// knownImageTypes are the tag suffixes Istio publishes images with.
var knownImageTypes = []string{"distroless", "debug"}

func (j *job) imageURL(name, typ string, ann map[string]string) string {
	tag := j.s.Values.str("global", "tag")
	if typ == "" {
		typ = j.s.Values.str("global", "variant")
	}
	if v, ok := ann[annotation.SidecarProxyImageType.Name]; ok {
		typ = v
	}
	if typ != "" {
		for _, k := range knownImageTypes {
			if strings.HasSuffix(tag, "-"+k) {
				tag = strings.TrimSuffix(tag, "-"+k)
				break
			}
		}
		if typ != "default" {
			tag += "-" + typ
		}
	}
	return j.s.Values.str("global", "hub") + "/" + name + ":" + tag
}

func inboundMode(mc *meshconfig.MeshConfig) string {
	if mc.GetInboundTrafficPolicy().GetMode() == meshconfig.MeshConfig_InboundTrafficPolicy_LOCALHOST {
		return "localhost"
	}
	return "passthrough"
}

// podPatchMeta is the strategic-merge schema of a Pod.
var podPatchMeta = func() strategicpatch.LookupPatchMeta {
	m, err := strategicpatch.NewPatchMetaFromStruct(corev1.Pod{})
	if err != nil {
		panic(err) // a k8s.io/api type always has a schema
	}
	return m
}()

// copyJSON deep-copies a decoded JSON value. A map is cloned whole
// (maps.Clone copies its table, faster than inserting each key) and its
// containers replaced by their copies.
func copyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := maps.Clone(x)
		for k, e := range m {
			switch e.(type) {
			case map[string]any, []any:
				m[k] = copyJSON(e)
			}
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = copyJSON(e)
		}
		return l
	}
	return v
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	if i := containerIndex(cs, name); i >= 0 {
		return &cs[i]
	}
	return nil
}

func containerIndex(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

// findSidecar is the proxy container, among containers first.
func findSidecar(p *corev1.Pod) *corev1.Container {
	if c := findContainer(p.Spec.Containers, proxyName); c != nil {
		return c
	}
	return findContainer(p.Spec.InitContainers, proxyName)
}

// withoutContainer returns cs without the containers named name (a new
// slice, never nil).
func withoutContainer(cs []corev1.Container, name string) []corev1.Container {
	out := make([]corev1.Container, 0, len(cs))
	for _, c := range cs {
		if c.Name != name {
			out = append(out, c)
		}
	}
	return out
}
