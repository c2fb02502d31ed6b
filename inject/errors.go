package inject

import "errors"

// Sentinel errors. Each is wrapped with the file, object or field at fault.
var (
	// ErrConfig: the injector ConfigMap's `config` key does not parse, or
	// one of its templates does not.
	ErrConfig = errors.New("bad injector config")
	// ErrValues: the injector ConfigMap's `values` key does not parse.
	ErrValues = errors.New("bad injector values")
	// ErrMesh: the mesh config does not parse.
	ErrMesh = errors.New("bad mesh config")
	// ErrAnnotation: a pod annotation the injector reads has a value it
	// cannot use; the pod is denied, never half-injected.
	ErrAnnotation = errors.New("invalid annotation")
	// ErrTemplate: a template is unknown, fails to run, or renders
	// something that is not a pod overlay.
	ErrTemplate = errors.New("injection template")
	// ErrPod: the pod cannot be decoded or patched.
	ErrPod = errors.New("bad pod")
	// ErrAdmissionReview: a request that is not a well-formed
	// AdmissionReview (the HTTP answer is 400).
	ErrAdmissionReview = errors.New("bad AdmissionReview")
)
