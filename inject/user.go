package inject

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"istio.io/api/annotation"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// userContainers lets a user customise what is injected: a container
// the templates inject (tmpl) that the pod (or its recorded overrides)
// also defines, for instance its own istio-proxy with other resources,
// is merged back over the injected one. It returns those merges, in
// order, as pods' JSON forms (render applies them after the templates),
// and the definitions used. A container the last injection added (named
// in sidecar.istio.io/status) is not the user's and is left to the new
// templates.
func (j *job) userContainers(tmpl *status) ([]map[string]any, overrides, error) {
	orig := j.pod
	var used overrides
	saved, err := parseOverrides(orig.Annotations)
	if err != nil {
		return nil, used, err
	}
	st, injected := parseStatus(orig.Annotations[annotation.SidecarStatus.Name])
	var out []map[string]any
	add := func(what string, o corev1.Container, p *corev1.Pod) error {
		m, err := toMap(p)
		if err != nil {
			return fmt.Errorf("%w: applying the pod's own %s %s: %v", ErrPod, o.Name, what, err)
		}
		out = append(out, m)
		return nil
	}
	for _, name := range tmpl.Containers {
		if injected && contains(st.Containers, name) {
			continue
		}
		m := findContainer(saved.Containers, name)
		if m == nil {
			m = findContainer(orig.Spec.Containers, name)
		}
		if m == nil {
			continue
		}
		o := *m.DeepCopy()
		if o.Image == autoImage {
			o.Image = ""
		}
		used.Containers = append(used.Containers, o)
		if err := add("container", o, &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{o}}}); err != nil {
			return nil, used, err
		}
	}
	for _, name := range tmpl.InitContainers {
		if injected && contains(st.InitContainers, name) {
			continue
		}
		m := findContainer(saved.InitContainers, name)
		if m == nil {
			m = findContainer(orig.Spec.Containers, name)
		}
		if m == nil {
			m = findContainer(orig.Spec.InitContainers, name)
		}
		if m == nil {
			continue
		}
		o := *m.DeepCopy()
		if o.Image == autoImage {
			o.Image = ""
		}
		used.InitContainers = append(used.InitContainers, o)
		// containers: [] keeps the patch from deleting the containers.
		if err := add("init container", o, &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{}, InitContainers: []corev1.Container{o}}}); err != nil {
			return nil, used, err
		}
	}
	return out, used, nil
}

// recordUserContainers records, on first injection, the user's
// definitions of injected containers in proxy.istio.io/overrides (so a
// re-injection can re-apply them), and follows their user ids.
func (j *job) recordUserContainers(final *corev1.Pod, used overrides) error {
	_, hasStatus := j.pod.Annotations[annotation.SidecarStatus.Name]
	if !hasStatus && len(used.Containers)+len(used.InitContainers) > 0 {
		b, err := json.Marshal(used)
		if err != nil {
			return err
		}
		if final.Annotations == nil {
			final.Annotations = map[string]string{}
		}
		final.Annotations[annotation.ProxyOverrides.Name] = string(b)
	}
	j.adjustInitUser(final)
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// adjustInitUser follows a user's istio-proxy runAsUser/runAsGroup: the
// iptables rules must exempt the proxy's real uid (-u), and
// istio-validation runs as the proxy; in TPROXY mode the proxy must stay
// root.
func (j *job) adjustInitUser(final *corev1.Pod) {
	user := findSidecar(j.pod)
	if user == nil || user.SecurityContext == nil || (user.SecurityContext.RunAsUser == nil && user.SecurityContext.RunAsGroup == nil) {
		return
	}
	init := findContainer(final.Spec.InitContainers, initName)
	if init == nil {
		init = findContainer(final.Spec.InitContainers, validationName)
	}
	if init == nil {
		return
	}
	tproxy := j.pc.GetInterceptionMode() == meshconfig.ProxyConfig_TPROXY ||
		final.Annotations[annotation.SidecarInterceptionMode.Name] == "TPROXY"
	if tproxy && user.SecurityContext.RunAsUser != nil {
		if sc := findSidecar(final); sc != nil && sc.SecurityContext != nil && sc.SecurityContext.RunAsUser != nil {
			*sc.SecurityContext.RunAsUser = 0
		}
	}
	if !tproxy && init.Name == validationName {
		if init.SecurityContext == nil {
			init.SecurityContext = &corev1.SecurityContext{}
		}
		if user.SecurityContext.RunAsUser != nil {
			init.SecurityContext.RunAsUser = user.SecurityContext.RunAsUser
		}
		if user.SecurityContext.RunAsGroup != nil {
			init.SecurityContext.RunAsGroup = user.SecurityContext.RunAsGroup
		}
	}
	if uid := user.SecurityContext.RunAsUser; uid != nil && *uid != 0 {
		for i := 0; i+1 < len(init.Args); i++ {
			if init.Args[i] == "-u" {
				init.Args[i+1] = strconv.FormatInt(*uid, 10)
				return
			}
		}
	}
}
