package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// A config directory and a real API server (internal/kubetest) define the
// same VirtualService and ServiceEntry differently; the two ServiceEntries
// have different hosts, so the rows of one version are not those of the
// other and a hand-over that leaves a row behind shows.

const precVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: shop
spec:
  hosts: [reviews.shop.svc.cluster.local]
  http:
  - route:
    - destination: {host: reviews.shop.svc.cluster.local, subset: SUBSET}
`

const precSE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: ext
  namespace: shop
spec:
  hosts: [a.ext.test, b.ext.test]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
`

// precEnv is the API server and the directory every pair of sources reads.
type precEnv struct {
	t   *testing.T
	c   *kubetest.Cluster
	dir string
}

// precPair is a FileSource and a KubeSource sharing a Writer and a
// Precedence, as serve wires them.
type precPair struct {
	w    *index.Writer
	file *FileSource
	kube *KubeSource
	stop func()
}

// start runs a pair on the environment's inputs, one source after the
// other (each synced before the next starts).
func (e *precEnv) start(fileFirst bool) *precPair {
	e.t.Helper()
	w := index.NewWriter()
	p := NewPrecedence()
	pp := &precPair{w: w,
		file: NewFileSource(w, FileSourceOptions{Dir: e.dir, Debounce: 10 * time.Millisecond, Precedence: p}),
		kube: NewKubeSource(w, KubeSourceOptions{Client: e.c.Client, Istio: e.c.Istio,
			BatchWindow: time.Millisecond, DiscoveryInterval: 100 * time.Millisecond, Precedence: p}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan error
	run := func(name string, runFn func(context.Context) error, synced func() bool) {
		ch := make(chan error, 1)
		done = append(done, ch)
		go func() { ch <- runFn(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for !synced() {
			if time.Now().After(deadline) {
				e.t.Fatalf("the %s source did not sync in a minute", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	pp.stop = func() {
		cancel()
		for _, ch := range done {
			if err := <-ch; err != nil {
				e.t.Errorf("Run: %v", err)
			}
		}
		done = nil
	}
	e.t.Cleanup(pp.stop)
	if fileFirst {
		run("file", pp.file.Run, pp.file.Synced)
		run("kubernetes", pp.kube.Run, pp.kube.Synced)
	} else {
		run("kubernetes", pp.kube.Run, pp.kube.Synced)
		run("file", pp.file.Run, pp.file.Synced)
	}
	return pp
}

// served renders what the index holds of the two objects: each config's
// origin (a file:line, or "api") and content, and the services the
// ServiceEntries produce.
func (pp *precPair) served() string {
	s := pp.w.Snapshot()
	var out []string
	from := func(c *index.Config) string {
		if c.SourceFile == 0 {
			return "api"
		}
		return fmt.Sprintf("%s:%d", filepath.Base(s.String(c.SourceFile)), c.SourceLine)
	}
	s.Configs(index.ConfigVirtualService, func(c *index.Config) bool {
		vs := c.Spec.(*networking.VirtualService)
		out = append(out, fmt.Sprintf("VirtualService %s from %s to %s", s.String(c.Key.Name), from(c),
			vs.Http[0].Route[0].Destination.Subset))
		return true
	})
	s.Configs(index.ConfigServiceEntry, func(c *index.Config) bool {
		se := c.Spec.(*networking.ServiceEntry)
		out = append(out, fmt.Sprintf("ServiceEntry %s from %s hosts %s", s.String(c.Key.Name), from(c),
			strings.Join(se.Hosts, ",")))
		return true
	})
	s.Services(func(_ index.ServiceID, v *index.Service) bool {
		if h := s.String(v.Key.Host); strings.HasSuffix(h, ".ext.test") {
			out = append(out, "service "+h)
		}
		return true
	})
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// errors are the file source's errors, without the directory's name.
func (pp *precPair) errors() string {
	lines := errorLines(pp.file.Errors())
	for i, l := range lines {
		if j := strings.IndexByte(l, '/'); j >= 0 {
			lines[i] = l[j+1:]
		}
	}
	return strings.Join(lines, "\n")
}

func (e *precEnv) write(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *precEnv) remove(name string) {
	e.t.Helper()
	if err := os.Remove(filepath.Join(e.dir, name)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *precEnv) createVS(subset string) {
	e.t.Helper()
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop"}}
	vs.Spec.Hosts = []string{"reviews.shop.svc.cluster.local"}
	vs.Spec.Http = []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{
		{Destination: &networking.Destination{Host: "reviews.shop.svc.cluster.local", Subset: subset}}}}}
	if _, err := e.c.Istio.NetworkingV1().VirtualServices("shop").Create(context.Background(), vs, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *precEnv) createSE() {
	e.t.Helper()
	se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "shop"}}
	se.Spec.Hosts = []string{"a.ext.test"}
	se.Spec.Ports = []*networking.ServicePort{{Number: 443, Name: "tls", Protocol: "TLS"}}
	se.Spec.Resolution = networking.ServiceEntry_DNS
	if _, err := e.c.Istio.NetworkingV1().ServiceEntries("shop").Create(context.Background(), se, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *precEnv) deleteAPI(kind string) {
	e.t.Helper()
	var err error
	switch kind {
	case "VirtualService":
		err = e.c.Istio.NetworkingV1().VirtualServices("shop").Delete(context.Background(), "reviews", metav1.DeleteOptions{})
	case "ServiceEntry":
		err = e.c.Istio.NetworkingV1().ServiceEntries("shop").Delete(context.Background(), "ext", metav1.DeleteOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// TestPrecedenceAPIServerOverDirectory: while the API server and the
// directory define one object, the index holds the API server's version
// and the file source reports its own definition; a deletion from the API
// server hands the object to the directory in the same batch, a deletion
// or edit in the directory leaves the API server's rows alone. After every
// step a pair of sources started afresh on the same inputs, in either
// order, serves exactly what the running pair serves and reports the same
// errors. The running pair is itself started in each order. Churn then
// changes both sources at once, at random, and checks where they settle.
func TestPrecedenceAPIServerOverDirectory(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	c.EnsureNamespace(t, "shop")
	for _, fileFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("Steps/fileFirst=%v", fileFirst), func(t *testing.T) {
			e := &precEnv{t: t, c: c, dir: filepath.Join(t.TempDir(), "conf")}
			if err := os.Mkdir(e.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			e.write("vs.yaml", strings.Replace(precVS, "SUBSET", "file", 1))
			e.write("se.yaml", precSE)
			run := e.start(fileFirst)
			step := func(name, wantServed, wantErrs string) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for run.served() != wantServed || run.errors() != wantErrs {
					if time.Now().After(deadline) {
						t.Fatalf("%s: the running sources serve\n%s\nwith errors\n%s\nwant\n%s\nwith errors\n%s",
							name, run.served(), run.errors(), wantServed, wantErrs)
					}
					time.Sleep(5 * time.Millisecond)
				}
				for _, first := range []bool{true, false} {
					again := e.start(first)
					if got, errs := again.served(), again.errors(); got != wantServed || errs != wantErrs {
						t.Errorf("%s: sources started afresh (fileFirst=%v) serve\n%s\nwith errors\n%s\nthe running ones\n%s\nwith errors\n%s",
							name, first, got, errs, wantServed, wantErrs)
					}
					again.stop()
				}
			}
			const (
				shadowVS = "vs.yaml:1: VirtualService shop/reviews: also defined by the Kubernetes API server, whose definition is used (the API server's wins over the config directory's)"
				shadowSE = "se.yaml:1: ServiceEntry shop/ext: also defined by the Kubernetes API server, whose definition is used (the API server's wins over the config directory's)"
			)
			fileVS := "VirtualService reviews from vs.yaml:1 to file"
			fileSE := "ServiceEntry ext from se.yaml:1 hosts a.ext.test,b.ext.test\nservice a.ext.test\nservice b.ext.test"
			apiVS := "VirtualService reviews from api to api"
			apiSE := "ServiceEntry ext from api hosts a.ext.test\nservice a.ext.test"
			lines := func(parts ...string) string {
				l := strings.Split(strings.Join(parts, "\n"), "\n")
				slices.Sort(l)
				return strings.Join(l, "\n")
			}

			step("the directory alone", lines(fileSE, fileVS), "")

			e.createVS("api")
			e.createSE()
			step("the API server defines both too", lines(apiSE, apiVS), lines(shadowSE, shadowVS))
			before, _ := run.w.Snapshot().Config(index.ConfigVirtualService, vsKey(run.w))

			e.write("vs.yaml", strings.Replace(precVS, "SUBSET", "edited", 1))
			step("the file edited while shadowed", lines(apiSE, apiVS), lines(shadowSE, shadowVS))
			if after, _ := run.w.Snapshot().Config(index.ConfigVirtualService, vsKey(run.w)); after == nil || before == nil ||
				after.Hash != before.Hash || after.SourceFile != 0 {
				t.Errorf("editing the shadowed file changed the API server's row: %+v, was %+v", after, before)
			}
			fileVS = "VirtualService reviews from vs.yaml:1 to edited"

			e.deleteAPI("VirtualService")
			e.deleteAPI("ServiceEntry")
			step("deleted from the API server", lines(fileSE, fileVS), "")

			e.createVS("api")
			e.createSE()
			step("re-created in the API server", lines(apiSE, apiVS), lines(shadowSE, shadowVS))

			e.remove("se.yaml")
			step("the file deleted while shadowed", lines(apiSE, apiVS), shadowVS)

			e.deleteAPI("ServiceEntry")
			step("then deleted from the API server", apiVS, shadowVS)

			e.write("se.yaml", precSE)
			e.deleteAPI("VirtualService")
			step("the file back, the API server's VirtualService gone", lines(fileSE, fileVS), "")
		})
	}
	t.Run("Churn", func(t *testing.T) { precedenceChurn(t, c) })
}

// vsKey is the index key of shop/reviews.
func vsKey(w *index.Writer) index.ConfigKey {
	return index.ConfigKey{Namespace: w.Symbols().Intern("shop"), Name: w.Symbols().Intern("reviews")}
}
