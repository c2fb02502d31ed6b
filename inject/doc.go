// Package inject owns sidecar injection: istiod's mutating admission
// webhook (POST /inject), as a pure function of the pod, the injector
// ConfigMap (`istio-sidecar-injector`: its `config` and `values` keys),
// the mesh config and a few injector settings. It has no xDS and no
// index involvement.
//
// # What it reads, and how
//
// The injector config is istiod's own format (ParseConfig): policy,
// templates, defaultTemplates, aliases, neverInjectSelector,
// alwaysInjectSelector, injectedAnnotations. Templates are Go
// text/templates run with the function set istiod offers (funcs.go:
// sprig's, then istiod's own), over a data value whose fields and types
// are istiod's (TemplateData), so the templates istiod's chart ships
// (sidecar, gateway, grpc-agent, grpc-simple, ...) and a user's
// customised ones render the same. The mesh config is read with
// istiod's defaults and merge rules (ParseMesh), proxy.istio.io/config is
// merged over its defaultConfig.
//
// One injection (Injector.Inject): the policy decision (policy.go); the
// pod's annotations checked (validate.go); the selected templates
// rendered and merged over the pod with Kubernetes' strategic merge patch
// (render.go); the user's own definitions of injected containers merged
// back (user.go); then what templates cannot do (post.go, probes.go):
// metrics merging, probe rewriting to the agent's port, the
// sidecar.istio.io/status annotation, container order. The result is an
// RFC 6902 JSON patch against the pod (patch.go). The HTTP handler
// (webhook.go) answers AdmissionReview v1 and v1beta1.
//
// istiod's behaviour is the reference: testdata/corpus holds Pods and
// Deployments with `istioctl kube-inject`'s output for each, and
// TestCorpusMatchesIstioctl applies pilotfish's patch and compares.
//
// # Cost
//
// What does not depend on the pod is done once per Settings: each
// template is folded over the settings on first use (fold.go: actions,
// conditions and operands that read only .Values, .MeshConfig and the
// other settings fields become text, a branch or a literal;
// TestFoldedTemplatesRenderTheSame). Rendered template text is parsed
// once per distinct text (a bounded cache in the Config: a Deployment's
// replicas render the same text), and the names it injects with it.
// Per pod: the pod becomes JSON once (decodeJSONFloats), the templates'
// output is merged over it (a copy of each cached overlay: the strategic
// merge writes into what it takes), the result becomes typed without
// going through text (fromJSONValue), and the patch is diffed on the
// typed pods, marshalling only what changed (typedPatch). Budget: 1,900
// allocations per injection averaged over the corpus (TestInjectAllocs;
// 1,445 measured). The injector config's heap is measured by
// TestInjectorConfigMemory (docs/injection.md, "Performance").
//
// # Invariants
//
//   - A pod is either injected in full or not at all: the patch is
//     computed completely before it is returned; any error denies the pod
//     (with the reason), policy leaves it alone with no patch.
//   - Settings (config, values, mesh) are immutable once handed to an
//     Injector; Update swaps them atomically, and a bad config never
//     replaces a good one (the caller parses first).
//   - The input pod is never modified.
//   - Memory per request is bounded by the request body limit
//     (MaxReviewBytes).
//
// # Imports
//
// inject imports no other pilotfish package (it stands alone: cmd wires
// it to the webhook server); it uses k8s.io/api and istio.io/api types,
// sprig for templates and golang/protobuf's jsonpb for istiod's exact
// proto JSON.
package inject
