package ingest

import (
	"reflect"
	"strconv"

	extensions "istio.io/api/extensions/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Validate checks an object against the semantic rules istiod's validation
// webhook and the Kubernetes API server (with Istio's CRD schemas) enforce,
// so that what pilotfish accepts, Istio accepts, and what Istio rejects is
// reported before it reaches a proxy. Each error is an *Error naming the
// field path and, for objects from Decode, the line of that field (else of
// the document). Warnings istiod only logs are not reported. Validate never
// modifies o and never panics, whatever o holds.
func Validate(o *Object) []error {
	if o == nil {
		return nil
	}
	v := &validator{reporter: reporter{
		file: o.Pos.File, kind: o.Kind.String(), namespace: o.Meta.Namespace, name: o.Meta.Name,
		docLine: o.Pos.Line, src: o.src,
	}}
	if o.Kind == KindUnknown || o.Kind >= numKinds {
		v.kind = ""
		v.errorf(nil, "unknown kind %d", o.Kind)
		return v.errs
	}
	v.info = &kinds[o.Kind]
	v.meta(&o.Meta)
	if !v.specOK(o) {
		return v.errs
	}
	spec := (*fieldPath)(nil).f("spec")
	switch s := o.Spec.(type) {
	case *networking.VirtualService:
		v.virtualService(spec, s)
	case *networking.DestinationRule:
		v.destinationRule(spec, s)
	case *networking.ServiceEntry:
		v.serviceEntry(spec, s)
	case *networking.WorkloadEntry:
		v.workloadEntry(spec, s)
	case *networking.Gateway:
		v.gateway(spec, s)
	case *networking.Sidecar:
		v.sidecar(spec, s)
	case *networking.EnvoyFilter:
		v.envoyFilter(spec, s) // validate_envoyfilter.go
	case *extensions.WasmPlugin:
		v.wasmPlugin(spec, s) // validate_wasmplugin.go
	case *telemetry.Telemetry:
		v.telemetry(spec, s) // validate_telemetry.go
	case *security.AuthorizationPolicy:
		v.authorizationPolicy(spec, s)
	case *security.PeerAuthentication:
		v.peerAuthentication(spec, s)
	case *security.RequestAuthentication:
		v.requestAuthentication(spec, s)
	case *corev1.Service:
		v.service(s)
	case *discoveryv1.EndpointSlice:
		v.endpointSlice(s)
	case *corev1.Pod:
		v.pod(s)
	case *corev1.Namespace:
		// Its name is all there is to check.
	case *corev1.Secret:
		v.secret(s)
	}
	sortErrors(v.errs)
	return v.errs
}

// specOK reports whether o.Spec is a non-nil value of the type o.Kind
// decodes to.
func (v *validator) specOK(o *Object) bool {
	want := reflect.TypeOf(v.info.newObject())
	if got := reflect.TypeOf(o.Spec); got != want {
		v.errorf(nil, "spec of type %v is not a %s (want %v)", got, o.Kind, want)
		return false
	}
	if reflect.ValueOf(o.Spec).IsNil() {
		v.errorf(nil, "spec is nil")
		return false
	}
	return true
}

// validator checks one object; its check methods report through the
// embedded reporter.
type validator struct {
	reporter
	info *kindInfo
}

// meta checks name, namespace, labels and annotations the way the API
// server does for the kind.
func (v *validator) meta(m *metav1.ObjectMeta) {
	var root *fieldPath
	md := root.f("metadata")
	switch {
	case m.Name == "":
		v.errorf(md.f("name"), "required")
	case v.info.name == "Service":
		// Service names become DNS labels, and must start with a letter.
		v.dnsName(md.f("name"), m.Name, dns1035Label)
	case v.info.name == "Namespace":
		v.dnsName(md.f("name"), m.Name, dns1123Label)
	case v.info.name == "Gateway":
		// istiod: a Gateway's name is used in "namespace/name" references.
		if !isIstioLabel(m.Name) {
			v.errorf(md.f("name"), "invalid Gateway name %q: must be a DNS-1123 label (no dots)", m.Name)
		}
	default:
		v.dnsName(md.f("name"), m.Name, dns1123Subdomain)
	}
	if v.info.namespaced && m.Namespace != "" {
		v.dnsName(md.f("namespace"), m.Namespace, dns1123Label)
	}
	v.labels(md.f("labels"), m.Labels)
	v.checkAnnotationsSize(m) // limits.go
	for _, k := range sortedMapKeys(m.Annotations) {
		if msg := labelKeyError(k); msg != "" {
			v.errorf(md.f("annotations").k(k), "invalid annotation key %q: %s", k, msg)
		}
	}
	if val, found := m.Annotations[annotationDryRun]; found {
		if v.info.name != "AuthorizationPolicy" {
			v.errorf(md.f("annotations").k(annotationDryRun), "only AuthorizationPolicy supports the %s annotation", annotationDryRun)
		} else if _, err := strconv.ParseBool(val); err != nil {
			v.errorf(md.f("annotations").k(annotationDryRun), "must be true or false, not %q", val)
		}
	}
}
