package rules

import (
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// TestViewMemosSharedAndVerified: the copies of a scope for endpoint-only
// snapshots share its memos (the route view is computed once), a new
// config version starts afresh, and verify mode catches a memo that no
// longer matches what it memoizes, for each of them.
func TestViewMemosSharedAndVerified(t *testing.T) {
	y, err := istiobench.Render("gateways", istiobench.Params{Services: 3})
	if err != nil {
		t.Fatal(err)
	}
	sw := newScopedWriter(t, string(y))
	snap := sw.w.Snapshot()
	mesh := encode.DefaultMesh()
	var vs Views
	vs.Verify = true
	router := routerScope(snap, "istio-system", benchLabels).Class
	sc := NewScopeIn(vs.Of(snap), snap, router)
	rv, gw := routeViewOf(sc, mesh), gatewayOf(sc, mesh)
	if !hasAutoPassthrough(sc) == scanAutoPassthrough(sc) {
		t.Fatal("hasAutoPassthrough disagrees with a scan")
	}

	// An endpoint-only snapshot: the class's scope is copied, memos shared.
	cp := *sc
	cp.Snapshot = snap // the same rows; verify checks again per snapshot version
	if routeViewOf(&cp, mesh) != rv || gatewayOf(&cp, mesh) != gw {
		t.Fatal("a copy of the scope recomputed its memos")
	}
	// A new config version: a new view, new memos; the merged gateway is
	// reused (nothing it reads changed).
	sw.apply(`
apiVersion: v1
kind: Service
metadata: {name: other, namespace: elsewhere}
spec: {clusterIP: 10.96.7.7, ports: [{name: http, port: 80}]}`)
	next := sw.w.Snapshot()
	sc2 := NewScopeIn(vs.Of(next), next, router)
	if sc2.view == sc.view || sc2.memo == sc.memo {
		t.Fatal("a new config version shares the old view")
	}
	if gatewayOf(sc2, mesh) != gw {
		t.Error("an unrelated change rebuilt the merged gateway")
	}

	expectPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if msg, _ := r.(string); !strings.Contains(msg, "engine: verify:") {
				t.Errorf("%s: verify mode did not catch a stale memo (recovered %v)", what, r)
			}
		}()
		f()
	}
	stale := NewScopeIn(vs.Of(next), next, router)
	stale.memo.routes.Store(&routeViewMemo{mesh: mesh, v: &routeView{}})
	expectPanic("route view", func() { routeViewOf(stale, mesh) })
	stale.memo.gateway.Store(&mergedGateway{digest: 1})
	expectPanic("merged gateway", func() { gatewayOf(stale, mesh) })
	stale.memo.autoPassthrough.set(!scanAutoPassthrough(stale))
	expectPanic("AUTO_PASSTHROUGH", func() { hasAutoPassthrough(stale) })
	stale.view.autoPassthrough.set(!AutoPassthrough(next))
	expectPanic("AUTO_PASSTHROUGH of the version", func() { stale.view.HasAutoPassthrough(next) })
}
