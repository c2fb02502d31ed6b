package deploy_test

import (
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// TestChartCoversWatchedKinds: every Istio resource the Kubernetes source
// watches is granted list and watch by the chart's ClusterRole and its
// group is validated by the chart's webhook, so a kind added to the source
// cannot ship unreadable in a real cluster (or admitted without a check).
func TestChartCoversWatchedKinds(t *testing.T) {
	out := runHelm(t, "template", "pilotfish", "charts/pilotfish", "--namespace", namespace)
	roles := objects[rbacv1.ClusterRole](t, out, "ClusterRole")
	hooks := objects[admissionv1.ValidatingWebhookConfiguration](t, out, "ValidatingWebhookConfiguration")
	if len(roles) == 0 || len(hooks) == 0 {
		t.Fatalf("rendered %d ClusterRoles and %d validating webhooks", len(roles), len(hooks))
	}
	watched := ingest.WatchedIstioResources()
	if len(watched) == 0 {
		t.Fatal("the source watches no Istio resource")
	}
	for _, w := range watched {
		for _, verb := range []string{"list", "watch"} {
			if !granted(roles, w.Group, w.Resource, verb) {
				t.Errorf("the chart's ClusterRole does not grant %s on %s.%s", verb, w.Resource, w.Group)
			}
		}
		if !validated(hooks, w.Group) {
			t.Errorf("the chart's validation webhook does not cover group %s (%s)", w.Group, w.Resource)
		}
	}
}

func granted(roles map[string]*rbacv1.ClusterRole, group, resource, verb string) bool {
	for _, r := range roles {
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) &&
				(slices.Contains(rule.Verbs, verb) || slices.Contains(rule.Verbs, "*")) {
				return true
			}
		}
	}
	return false
}

func validated(hooks map[string]*admissionv1.ValidatingWebhookConfiguration, group string) bool {
	for _, h := range hooks {
		for _, wh := range h.Webhooks {
			for _, rule := range wh.Rules {
				if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, "*") {
					return true
				}
			}
		}
	}
	return false
}
