package ingest

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
)

const testService = `apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: shop
spec:
  clusterIP: 10.96.0.10
  selector: {app: reviews}
  ports:
  - {name: http, port: 9080, targetPort: 8080}
`

const testSlice = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-abc
  namespace: shop
  labels: {kubernetes.io/service-name: reviews}
addressType: IPv4
ports:
- {name: http, port: 8080}
endpoints:
- addresses: ["10.244.0.5"]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: reviews-v1-0}
  zone: zone-a
`

const testPod = `apiVersion: v1
kind: Pod
metadata:
  name: reviews-v1-0
  namespace: shop
  labels: {app: reviews, version: v1}
spec:
  serviceAccountName: reviews
  containers: [{name: app, image: reviews}]
status:
  podIP: 10.244.0.5
`

const testSE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: external
  namespace: shop
spec:
  hosts: [a.example.com, b.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: STATIC
  endpoints:
  - address: 192.0.2.1
  - address: 192.0.2.2
    ports: {tls: 8443}
`

type sourceFixture struct {
	mtime int
	t     *testing.T
	dir   string
	w     *index.Writer
	src   *FileSource
}

func newSourceFixture(t *testing.T) *sourceFixture {
	dir := t.TempDir()
	w := index.NewWriter()
	return &sourceFixture{t: t, dir: dir, w: w, src: NewFileSource(w, FileSourceOptions{Dir: dir, Resync: -1})}
}

func (f *sourceFixture) write(name, content string) {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	// Give every write its own modification time (a size+mtime check must
	// see it even within one clock tick), older than the debounce interval
	// so Sync reads it at once.
	f.mtime++
	past := time.Now().Add(-time.Hour + time.Duration(f.mtime)*time.Millisecond)
	_ = os.Chtimes(path, past, past)
}

func (f *sourceFixture) sync() *index.ChangeSet {
	f.t.Helper()
	cs, err := f.src.Sync()
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

func (f *sourceFixture) service(host, ns string) *index.Service {
	s, _, _ := f.w.Snapshot().LookupService(host, ns)
	return s
}

func TestFileSourceAppliesAndFollowsEdits(t *testing.T) {
	f := newSourceFixture(t)
	f.write("shop/reviews.yaml", testService+"---\n"+testSlice+"---\n"+testPod)
	f.write("shop/external.yaml", testSE)
	cs := f.sync()
	if !f.src.Synced() {
		t.Fatal("not synced after Sync")
	}
	if len(cs.Services) != 3 {
		t.Fatalf("first sync changed %d services, want 3 (reviews + 2 ServiceEntry hosts)", len(cs.Services))
	}
	snap := f.w.Snapshot()
	svc := f.service("reviews.shop.svc.cluster.local", "shop")
	if svc == nil || len(svc.Ports) != 1 || svc.Ports[0].Number != 9080 || svc.Ports[0].TargetPort != 8080 || svc.Ports[0].Protocol != index.ProtocolHTTP {
		t.Fatalf("reviews = %+v", svc)
	}
	sh := snap.Endpoints(svc.Key)
	if sh == nil || sh.Len() != 1 {
		t.Fatalf("reviews endpoints = %+v", sh)
	}
	ep := sh.Groups[0].Endpoints[0]
	if ep.Addr != netip.MustParseAddr("10.244.0.5") || snap.String(ep.ServiceAccount) != "reviews" || snap.String(ep.Locality) != "/zone-a" {
		t.Fatalf("endpoint = %+v (sa %q, locality %q)", ep, snap.String(ep.ServiceAccount), snap.String(ep.Locality))
	}
	if got := snap.Labels.Get(ep.Labels); len(got) != 2 {
		t.Fatalf("endpoint labels = %v, want the pod's two labels", got)
	}
	// The two ServiceEntry endpoints have different ports: two groups.
	se := f.service("b.example.com", "shop")
	if se == nil || se.Origin != index.OriginServiceEntry || se.Resolution != index.ResolutionClientSideLB {
		t.Fatalf("b.example.com = %+v", se)
	}
	if g := snap.Endpoints(se.Key).Groups; len(g) != 2 {
		t.Fatalf("ServiceEntry groups = %d, want 2 (one per port map)", len(g))
	}

	// Touching a file without changing it changes nothing.
	f.write("shop/external.yaml", testSE)
	if cs := f.sync(); !cs.Empty() {
		t.Fatalf("rewriting identical content changed %+v", cs)
	}

	// Dropping a ServiceEntry host removes that service only.
	f.write("shop/external.yaml", strings.Replace(testSE, "hosts: [a.example.com, b.example.com]", "hosts: [a.example.com]", 1))
	cs = f.sync()
	if len(cs.Services) != 1 || f.service("b.example.com", "shop") != nil || f.service("a.example.com", "shop") == nil {
		t.Fatalf("after dropping a host: change %v, a=%v b=%v", cs.Services, f.service("a.example.com", "shop"), f.service("b.example.com", "shop"))
	}
	if len(cs.Endpoints) != 1 {
		t.Fatalf("after dropping a host: endpoint changes %v, want only b's shard", cs.Endpoints)
	}
}

func TestFileSourceKeepsLastGoodVersion(t *testing.T) {
	f := newSourceFixture(t)
	f.write("reviews.yaml", testService+"---\n"+testSlice)
	f.sync()

	// An invalid port: the old service stays, the error names the object.
	f.write("reviews.yaml", strings.Replace(testService, "port: 9080", "port: 99999", 1)+"---\n"+testSlice)
	f.sync()
	if svc := f.service("reviews.shop.svc.cluster.local", "shop"); svc == nil || svc.Ports[0].Number != 9080 {
		t.Fatalf("invalid edit replaced the last good version: %+v", svc)
	}
	errs := f.src.Errors()
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "reviews.yaml:") || !strings.Contains(errs[0].Error(), "Service shop/reviews") {
		t.Fatalf("errors = %v, want one naming reviews.yaml and Service shop/reviews", errs)
	}

	// A YAML syntax error keeps every object of the file.
	f.write("reviews.yaml", "apiVersion: v1\nkind: Service\nmetadata: [unclosed\n")
	f.sync()
	if f.service("reviews.shop.svc.cluster.local", "shop") == nil || f.w.Snapshot().NumEndpointShards() != 1 {
		t.Fatal("a syntax error deleted the file's objects")
	}

	// Fixing the file applies it and clears the errors.
	f.write("reviews.yaml", strings.Replace(testService, "port: 9080", "port: 9081", 1))
	f.sync()
	if svc := f.service("reviews.shop.svc.cluster.local", "shop"); svc == nil || svc.Ports[0].Number != 9081 {
		t.Fatalf("fixed edit not applied: %+v", svc)
	}
	if f.w.Snapshot().NumEndpointShards() != 0 {
		t.Fatal("the slice removed from the file is still there")
	}
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Fatalf("errors after the fix: %v", errs)
	}
}

func TestFileSourceDuplicatesAndMoves(t *testing.T) {
	f := newSourceFixture(t)
	f.write("a.yaml", testService)
	f.sync()
	// The same object in a second file: the first definition wins.
	f.write("b.yaml", strings.Replace(testService, "port: 9080", "port: 7000", 1))
	f.sync()
	if svc := f.service("reviews.shop.svc.cluster.local", "shop"); svc.Ports[0].Number != 9080 {
		t.Fatalf("duplicate replaced the first definition: %+v", svc)
	}
	if errs := f.src.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "also defined at") {
		t.Fatalf("errors = %v, want a duplicate error", errs)
	}
	// Removing the first file hands the object to the second.
	if err := os.Remove(filepath.Join(f.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if svc := f.service("reviews.shop.svc.cluster.local", "shop"); svc == nil || svc.Ports[0].Number != 7000 {
		t.Fatalf("after removing a.yaml: %+v, want b.yaml's version", svc)
	}
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Fatalf("errors = %v after the duplicate was resolved", errs)
	}
}

func TestFileSourceWatchesDirectory(t *testing.T) {
	f := newSourceFixture(t)
	f.src = NewFileSource(f.w, FileSourceOptions{Dir: f.dir, Debounce: 10 * time.Millisecond, Resync: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.src.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for !f.src.Synced() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// A file in a folder created after start is picked up.
	f.write("new/dir/reviews.yaml", testService)
	for f.service("reviews.shop.svc.cluster.local", "shop") == nil {
		if time.Now().After(deadline) {
			t.Fatal("a file in a new folder was not picked up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestFileSourceMissingDir(t *testing.T) {
	src := NewFileSource(index.NewWriter(), FileSourceOptions{Dir: filepath.Join(t.TempDir(), "missing")})
	if err := src.Run(context.Background()); err == nil {
		t.Fatal("Run on a missing directory succeeded")
	}
}

// TestFileSourceQuietSyncReadsRecentFiles: a file written just now is left
// for a later pass by a plain Sync (it may still be being written), but read
// at once by the sync that follows a debounce interval without file events:
// every write raises an event, so the file is complete, and the change is
// applied in one batch instead of two debounce intervals later.
func TestFileSourceQuietSyncReadsRecentFiles(t *testing.T) {
	f := newSourceFixture(t)
	f.src = NewFileSource(f.w, FileSourceOptions{Dir: f.dir, Debounce: time.Hour, Resync: -1})
	f.sync() // the first sync reads everything; later ones honour the debounce
	path := filepath.Join(f.dir, "reviews.yaml")
	if err := os.WriteFile(path, []byte(testService), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.src.Sync(); err != nil {
		t.Fatal(err)
	}
	if f.service("reviews.shop.svc.cluster.local", "shop") != nil {
		t.Fatal("a plain Sync read a file written within the debounce interval")
	}
	cs, _, err := f.src.sync(true)
	if err != nil {
		t.Fatal(err)
	}
	if f.service("reviews.shop.svc.cluster.local", "shop") == nil || len(cs.Services) != 1 {
		t.Fatalf("the quiet sync did not apply the new file (change set %+v)", cs)
	}
}
