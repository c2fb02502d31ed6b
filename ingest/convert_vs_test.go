package ingest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestConvertVirtualServiceRow: the row of a VirtualService carries the
// label keys its matches' sourceLabels name and its creation time, which
// moves its hash (a VirtualService created again with the same spec
// changes precedence).
func TestConvertVirtualServiceRow(t *testing.T) {
	const vs = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop%s}
spec:
  hosts: [reviews]
  http:
  - match: [{sourceLabels: {app: productpage, version: v1}}, {uri: {prefix: /a}}]
    route: [{destination: {host: reviews}}]
  tcp:
  - match: [{sourceLabels: {zone: a}}]
    route: [{destination: {host: reviews}}]
  tls:
  - match: [{sniHosts: [reviews], sourceLabels: {app: details}}]
    route: [{destination: {host: reviews}}]
`
	row := func(t *testing.T, meta string) (*index.Config, *index.Snapshot) {
		w := index.NewWriter()
		apply(t, w, NewConverter(w, "cluster.local"), fmt.Sprintf(vs, meta))
		snap := w.Snapshot()
		ns, _ := snap.Symbols.Lookup("shop")
		name, _ := snap.Symbols.Lookup("reviews")
		c, ok := snap.Config(index.ConfigVirtualService, index.ConfigKey{Namespace: ns, Name: name})
		if !ok {
			t.Fatal("no row")
		}
		return c, snap
	}
	c, snap := row(t, "")
	var keys []string
	for _, k := range c.SourceLabelKeys {
		keys = append(keys, snap.String(k))
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"app", "version", "zone"}) || c.CreationTime != 0 {
		t.Errorf("keys %v (want app, version, zone once each), creation time %d", keys, c.CreationTime)
	}
	found := 0
	snap.ConfigsWithSourceLabels(index.ConfigVirtualService, func(*index.Config) bool { found++; return true })
	if found != 1 {
		t.Errorf("ConfigsWithSourceLabels found %d, want 1", found)
	}

	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, _ := row(t, ", creationTimestamp: "+created.Format(time.RFC3339))
	if d.CreationTime != created.UnixNano() {
		t.Errorf("creation time %d, want %d", d.CreationTime, created.UnixNano())
	}
	if d.Hash == c.Hash {
		t.Error("the creation time does not move the row's hash")
	}
}

// TestConvertVirtualServiceDelegates: the row lists the VirtualServices
// its routes delegate to, a delegate's namespace defaulting to its own.
func TestConvertVirtualServiceDelegates(t *testing.T) {
	w := index.NewWriter()
	apply(t, w, NewConverter(w, "cluster.local"), `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - match: [{uri: {prefix: /a}}]
    delegate: {name: a}
  - route: [{destination: {host: reviews}}]
  - match: [{uri: {prefix: /b}}]
    delegate: {name: b, namespace: team}
`)
	snap := w.Snapshot()
	sym := func(s string) index.Sym { id, _ := snap.Symbols.Lookup(s); return id }
	c, ok := snap.Config(index.ConfigVirtualService, index.ConfigKey{Namespace: sym("shop"), Name: sym("root")})
	if !ok {
		t.Fatal("no row")
	}
	want := []index.ConfigKey{{Namespace: sym("shop"), Name: sym("a")}, {Namespace: sym("team"), Name: sym("b")}}
	if !slices.Equal(c.Delegates, want) {
		t.Errorf("delegates %v, want %v", c.Delegates, want)
	}
}
