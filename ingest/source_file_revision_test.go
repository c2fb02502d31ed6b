package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

func revisionVS(name, labels string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: %s
  namespace: shop
  labels: {%s}
spec:
  hosts: [%s.shop.svc.cluster.local]
  http:
  - route:
    - destination: {host: %s.shop.svc.cluster.local}
`, name, labels, name, name)
}

// TestFileSourceRevision checks the istio.io/rev rule in a config
// directory: a source of revision "canary" reads unlabelled objects and
// those labelled canary, reports each object of another revision as a
// warning at its line, follows
// relabels both ways, and never filters Kubernetes kinds.
func TestFileSourceRevision(t *testing.T) {
	f := newSourceFixture(t)
	f.src = NewFileSource(f.w, FileSourceOptions{Dir: f.dir, Resync: -1, Revision: "canary"})
	f.write("a.yaml", revisionVS("plain", "")+"---\n"+revisionVS("mine", "istio.io/rev: canary")+"---\n"+
		revisionVS("other", "istio.io/rev: stable")+
		"---\n"+strings.Replace(testService, "namespace: shop", "namespace: shop\n  labels: {istio.io/rev: stable}", 1))
	f.sync()
	names := func() string {
		var out []string
		s := f.w.Snapshot()
		s.Configs(index.ConfigVirtualService, func(c *index.Config) bool {
			out = append(out, s.String(c.Key.Name))
			return true
		})
		return strings.Join(out, " ")
	}
	if got := names(); got != "mine plain" && got != "plain mine" {
		t.Errorf("VirtualServices read: %q, want mine and plain", got)
	}
	if f.service("reviews.shop.svc.cluster.local", "shop") == nil {
		t.Error("a Service labelled for another revision is not read (only Istio kinds are filtered)")
	}
	errs := errorLines(f.src.Errors())
	want := `a.yaml:25: warning: VirtualService shop/other: not read: labelled istio.io/rev=stable, and this control plane's revision is "canary"`
	if len(errs) != 1 || !strings.HasSuffix(errs[0], want) {
		t.Errorf("Errors: %q, want only %q", errs, want)
	}

	f.write("a.yaml", revisionVS("plain", "")+"---\n"+revisionVS("mine", "istio.io/rev: stable")+"---\n"+
		revisionVS("other", "istio.io/rev: canary"))
	f.sync()
	if got := names(); got != "other plain" && got != "plain other" {
		t.Errorf("VirtualServices read after relabelling: %q, want other and plain", got)
	}
	if errs := errorLines(f.src.Errors()); len(errs) != 1 || !strings.Contains(errs[0], "VirtualService shop/mine: not read") {
		t.Errorf("Errors after relabelling: %q", errs)
	}
}
