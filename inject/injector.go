package inject

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	meshconfig "istio.io/api/mesh/v1alpha1"
)

// Settings are everything an injection reads besides the pod: the
// injector ConfigMap (config and values), the mesh config and the
// injector's own settings. A Settings is immutable once handed to an
// Injector; a reload builds a new one.
type Settings struct {
	Config *Config
	Values *Values
	Mesh   *meshconfig.MeshConfig
	// Revision is the istio.io/rev this injector serves ("" for the
	// default revision), rendered as .Revision.
	Revision string
	// NativeSidecars renders the proxy as a Kubernetes native sidecar (an
	// init container with restartPolicy Always) unless a pod's
	// sidecar.istio.io/nativeSidecar says otherwise. istiod's default
	// ("auto") asks the nodes' kubelet versions; pilotfish takes it as a
	// setting.
	NativeSidecars bool
	// CompliancePolicy is istiod's COMPLIANCE_POLICY, rendered as
	// .CompliancePolicy.
	CompliancePolicy string
}

// Injector injects sidecars into pods with its current Settings, which
// Update swaps atomically: an injection in flight finishes with the
// Settings it started with.
type Injector struct {
	cur atomic.Pointer[state]
	log *slog.Logger
}

// state is a Settings with its templates folded over it (fold.go), each
// on first use.
type state struct {
	s    *Settings
	data TemplateData // the settings' fields of every injection's data

	mu     sync.Mutex
	folded map[string]*template.Template // guarded by mu
}

func newState(s *Settings) *state {
	return &state{s: s, data: TemplateData{
		MeshConfig:               s.Mesh,
		Values:                   s.Values.m,
		Revision:                 s.Revision,
		NativeSidecars:           s.NativeSidecars,
		ProxyUID:                 1337,
		ProxyGID:                 1337,
		InboundTrafficPolicyMode: inboundMode(s.Mesh),
		CompliancePolicy:         s.CompliancePolicy,
	}, folded: map[string]*template.Template{}}
}

// template is the config's template name folded over the settings, ok
// false when the config has none by that name. A template folding fails
// (it should not) is used as it is.
func (st *state) template(name string) (*template.Template, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if t, ok := st.folded[name]; ok {
		return t, true
	}
	t, ok := st.s.Config.templates[name]
	if !ok {
		return nil, false
	}
	if ft, err := foldTemplate(t, &st.data); err == nil {
		t = ft
	}
	st.folded[name] = t
	return t, true
}

// New returns an Injector with settings s (Config, Values and Mesh
// required). log gets one Debug line per decision; nil discards.
func New(s *Settings, log *slog.Logger) (*Injector, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	in := &Injector{log: log}
	if err := in.Update(s); err != nil {
		return nil, err
	}
	return in, nil
}

// Update replaces the settings; an incomplete Settings is refused and the
// previous one stays.
func (in *Injector) Update(s *Settings) error {
	if s == nil || s.Config == nil || s.Values == nil || s.Mesh == nil {
		return fmt.Errorf("%w: settings need a config, values and a mesh config", ErrConfig)
	}
	in.cur.Store(newState(s))
	return nil
}

// Settings returns the settings in force.
func (in *Injector) Settings() *Settings { return in.cur.Load().s }

// Request is one pod to inject.
type Request struct {
	// Pod is the pod as the API server would store it (not modified).
	Pod *corev1.Pod
	// Namespace is the request's namespace, used when the pod has none.
	Namespace string
	// Owner and OwnerType name the workload the pod belongs to (a
	// Deployment for kube-inject of a Deployment). When Owner.Name is
	// empty they are derived from the pod's controller reference, as
	// istiod does for pods the webhook sees.
	Owner     types.NamespacedName
	OwnerType metav1.TypeMeta
	// ProxyEnvs are set on the proxy container, overriding the template
	// (istiod's /inject/cluster/X/net/Y path parameters).
	ProxyEnvs map[string]string
}

// Result is the outcome of one injection.
type Result struct {
	// Injected is false when policy leaves the pod alone (Patch is nil).
	Injected bool
	// Patch is an RFC 6902 JSON patch against the pod's JSON.
	Patch []byte
	// Pod is the injected pod (nil when not injected).
	Pod *corev1.Pod
}

// Inject decides whether the pod gets a sidecar and, if so, computes the
// patch. An error means the pod must be denied: nothing is half-applied,
// since the patch is computed in full before it is returned.
func (in *Injector) Inject(req Request) (Result, error) {
	st := in.cur.Load()
	s := st.s
	pod := req.Pod.DeepCopy()
	pod.ManagedFields = nil // never read; only makes the diff slower
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	if !s.required(pod) {
		in.log.Debug("injection not required", "pod", pod.Namespace+"/"+podName(pod))
		return Result{}, nil
	}
	owner, ownerType := req.Owner, req.OwnerType
	if owner.Name == "" {
		owner, ownerType = ownerOf(pod)
	}
	envs := make(map[string]string, len(req.ProxyEnvs)+2)
	for k, v := range req.ProxyEnvs {
		envs[k] = v
	}
	j := &job{st: st, s: s, pod: pod, owner: owner, ownerType: ownerType, envs: envs}
	out, err := j.run()
	if err != nil {
		return Result{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, podName(pod), err)
	}
	patch, err := createPatch(j.pod, out)
	if err != nil {
		return Result{}, fmt.Errorf("pod %s/%s: %w: %v", pod.Namespace, podName(pod), ErrPod, err)
	}
	return Result{Injected: true, Patch: patch, Pod: out}, nil
}

// podName is the pod's name, or its generateName prefix with a marker
// (a Deployment's pods have no name yet when admitted).
func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	if p.GenerateName != "" {
		return p.GenerateName + "<generated>"
	}
	return ""
}

// ownerOf names the workload a pod belongs to, as istiod does: the
// controller of a pod with a generated name, a ReplicaSet's Deployment
// (by its pod-template-hash), a Job's CronJob (by its timestamp
// suffix); otherwise the pod itself.
func ownerOf(pod *corev1.Pod) (types.NamespacedName, metav1.TypeMeta) {
	name := types.NamespacedName{Name: pod.Name, Namespace: pod.Namespace}
	tm := metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	if pod.GenerateName != "" {
		for _, ref := range pod.OwnerReferences {
			if ref.Controller == nil || !*ref.Controller {
				continue
			}
			tm = metav1.TypeMeta{Kind: ref.Kind, APIVersion: ref.APIVersion}
			name.Name = ref.Name
			hash, rolloutHash := pod.Labels["pod-template-hash"], pod.Labels["rollouts-pod-template-hash"]
			switch {
			case ref.Kind == "ReplicaSet" && hash != "" && strings.HasSuffix(ref.Name, hash):
				name.Name = strings.TrimSuffix(ref.Name, "-"+hash)
				tm.Kind = "Deployment"
			case ref.Kind == "ReplicaSet" && rolloutHash != "" && strings.HasSuffix(ref.Name, rolloutHash):
				name.Name = strings.TrimSuffix(ref.Name, "-"+rolloutHash)
				tm = metav1.TypeMeta{Kind: "Rollout", APIVersion: "v1alpha1"}
			case ref.Kind == "ReplicationController" && pod.Labels["deploymentconfig"] != "":
				name.Name = pod.Labels["deploymentconfig"]
				tm.Kind = "DeploymentConfig"
			case ref.Kind == "Job":
				if base, ok := cronJobOf(ref.Name); ok {
					name.Name = base
					tm = metav1.TypeMeta{Kind: "CronJob", APIVersion: "batch/v1"}
				}
			}
			break
		}
	}
	if name.Name == "" {
		name.Name = pod.Name
	}
	return name, tm
}

// cronJobOf strips a CronJob's Job suffix: "-" and 8 to 10 digits.
func cronJobOf(job string) (string, bool) {
	i := strings.LastIndexByte(job, '-')
	if i <= 0 {
		return "", false
	}
	digits := job[i+1:]
	if len(digits) < 8 || len(digits) > 10 {
		return "", false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return job[:i], true
}
