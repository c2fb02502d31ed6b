package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	securityapi "istio.io/api/security/v1beta1"
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestKubeDryRunAuthorizationPolicy: an AuthorizationPolicy annotated
// istio.io/dry-run: "true" in the API server reaches the echo workload's
// sidecar as shadow rules (istio_dry_run_deny_ stats), as from files and
// in istiod, not enforced; an update of the annotation alone switches it to
// enforced rules and back.
func TestKubeDryRunAuthorizationPolicy(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	m := newKubeMesh(t, c, false)
	a := startKubeServe(t, c.Kubeconfig)

	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": kubeNS, "ISTIO_VERSION": "1.31.0", "CLUSTER_ID": "Kubernetes",
		"LABELS": map[string]any{"app": "echo", "version": "v1"}})
	ads := &sidecarProxy{t: t, node: &corev3.Node{Id: "sidecar~10.244.0.5~echo-v1-0.shop~shop.svc.cluster.local", Metadata: md}}
	ads.dial(a.grpc)
	t.Cleanup(ads.close)

	ap := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-admin", Namespace: kubeNS,
		Annotations: map[string]string{"istio.io/dry-run": "true"}}}
	ap.Spec.Selector = &typeapi.WorkloadSelector{MatchLabels: map[string]string{"app": "echo"}}
	ap.Spec.Action = securityapi.AuthorizationPolicy_DENY
	ap.Spec.Rules = []*securityapi.Rule{{To: []*securityapi.Rule_To{{Operation: &securityapi.Operation{Paths: []string{"/admin"}}}}}}
	aps := c.Istio.SecurityV1().AuthorizationPolicies(kubeNS)
	_, err := aps.Create(m.ctx(), ap, metav1.CreateOptions{})
	m.check(err)

	const policy = "ns[shop]-policy[deny-admin]-rule[0]"
	want := func(dryRun bool) func() string {
		return func() string {
			filters := inboundRBAC(t, ads.resources(resourcev3.ListenerType))
			if len(filters) == 0 {
				return "no RBAC filter on an inbound HTTP chain of the echo sidecar"
			}
			for _, f := range filters {
				enforced, shadow := f.GetRules().GetPolicies()[policy] != nil, f.GetShadowRules().GetPolicies()[policy] != nil
				switch {
				case dryRun && (enforced || !shadow || f.GetShadowRulesStatPrefix() != "istio_dry_run_deny_"):
					return fmt.Sprintf("dry-run policy: enforced %v, shadow %v, shadow stat prefix %q; want shadow rules only",
						enforced, shadow, f.GetShadowRulesStatPrefix())
				case !dryRun && (!enforced || shadow || f.GetRules().GetAction().String() != "DENY"):
					return fmt.Sprintf("enforced policy: rules %v, shadow %v; want DENY rules only", f.GetRules(), shadow)
				}
			}
			return ""
		}
	}
	eventually(t, "dry-run policy as shadow rules", want(true))
	for _, v := range []string{"false", "true"} {
		cur, err := aps.Get(m.ctx(), "deny-admin", metav1.GetOptions{})
		m.check(err)
		gen := cur.Generation
		cur.Annotations["istio.io/dry-run"] = v
		cur, err = aps.Update(m.ctx(), cur, metav1.UpdateOptions{})
		m.check(err)
		if cur.Generation != gen {
			t.Fatalf("an annotation-only update moved the generation %d → %d: the test no longer isolates annotations", gen, cur.Generation)
		}
		eventually(t, "istio.io/dry-run="+v, want(v == "true"))
	}
}

// inboundRBAC returns the HTTP RBAC filters of the listeners' inbound
// filter chains (those whose connection manager's stat prefix is
// inbound_...), in listener and chain order.
func inboundRBAC(t *testing.T, listeners map[string][]byte) []*rbachttp.RBAC {
	t.Helper()
	var out []*rbachttp.RBAC
	for _, name := range slices.Sorted(maps.Keys(listeners)) {
		var l listenerv3.Listener
		if err := proto.Unmarshal(listeners[name], &l); err != nil {
			t.Fatalf("listener %s: %v", name, err)
		}
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&hcm) != nil ||
					!strings.HasPrefix(hcm.GetStatPrefix(), "inbound_") {
					continue
				}
				for _, hf := range hcm.HttpFilters {
					var r rbachttp.RBAC
					if hf.GetName() == "envoy.filters.http.rbac" && hf.GetTypedConfig().UnmarshalTo(&r) == nil {
						out = append(out, &r)
					}
				}
			}
		}
	}
	return out
}
