package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// precedenceChurn changes a few VirtualServices in the API server and in
// the directory at once, in a seeded random order, without waiting for
// either source between changes, so that the KubeSource's flushes and the
// FileSource's syncs interleave every way they can. Once the changes stop,
// the running pair must settle on what the rule says (the API server's
// definition where it has one, else the directory's) and agree with pairs
// started afresh in either order; a deadlock shows as a pair that never
// settles or never stops.
func precedenceChurn(t *testing.T, c *kubetest.Cluster) {
	const objects, changes = 6, 300
	e := &precEnv{t: t, c: c, dir: filepath.Join(t.TempDir(), "conf")}
	if err := os.Mkdir(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := e.start(true)
	vsc := c.Istio.NetworkingV1().VirtualServices("shop")
	ctx := context.Background()
	api := make([]string, objects)  // the API server's subset of churn-j, "" if none
	file := make([]string, objects) // the directory's
	rng := rand.New(rand.NewPCG(21, 4))
	for i := range changes {
		j := rng.IntN(objects)
		name := fmt.Sprintf("churn-%d", j)
		path := filepath.Join(e.dir, name+".yaml")
		switch op := rng.IntN(4); {
		case op == 0:
			subset := fmt.Sprintf("api-%d", i)
			vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}}
			if api[j] != "" {
				got, err := vsc.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				vs = got
			}
			vs.Spec.Hosts = []string{name + ".shop.svc.cluster.local"}
			vs.Spec.Http = []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{
				{Destination: &networking.Destination{Host: name + ".shop.svc.cluster.local", Subset: subset}}}}}
			var err error
			if api[j] == "" {
				_, err = vsc.Create(ctx, vs, metav1.CreateOptions{})
			} else {
				_, err = vsc.Update(ctx, vs, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			api[j] = subset
		case op == 1 && api[j] != "":
			if err := vsc.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			api[j] = ""
		case op == 2:
			subset := fmt.Sprintf("file-%d", i)
			doc := strings.NewReplacer("reviews", name, "SUBSET", subset).Replace(precVS)
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			file[j] = subset
		case op == 3 && file[j] != "":
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			file[j] = ""
		}
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	}

	var served, errs []string
	for j := range objects {
		name := fmt.Sprintf("churn-%d", j)
		switch {
		case api[j] != "":
			served = append(served, fmt.Sprintf("VirtualService %s from api to %s", name, api[j]))
			if file[j] != "" {
				errs = append(errs, fmt.Sprintf("%s.yaml:1: VirtualService shop/%s: also defined by the Kubernetes API server, "+
					"whose definition is used (the API server's wins over the config directory's)", name, name))
			}
		case file[j] != "":
			served = append(served, fmt.Sprintf("VirtualService %s from %s.yaml:1 to %s", name, name, file[j]))
		}
	}
	slices.Sort(served)
	slices.Sort(errs)
	wantServed, wantErrs := strings.Join(served, "\n"), strings.Join(errs, "\n")
	deadline := time.Now().Add(30 * time.Second)
	for run.served() != wantServed || run.errors() != wantErrs {
		if time.Now().After(deadline) {
			t.Fatalf("after the churn the running sources serve\n%s\nwith errors\n%s\nwant\n%s\nwith errors\n%s",
				run.served(), run.errors(), wantServed, wantErrs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, first := range []bool{true, false} {
		again := e.start(first)
		if got, errs := again.served(), again.errors(); got != wantServed || errs != wantErrs {
			t.Errorf("sources started afresh (fileFirst=%v) serve\n%s\nwith errors\n%s\nwant\n%s\nwith errors\n%s",
				first, got, errs, wantServed, wantErrs)
		}
		again.stop()
	}
	run.stop()
	for j := range objects {
		if api[j] != "" {
			_ = vsc.Delete(ctx, fmt.Sprintf("churn-%d", j), metav1.DeleteOptions{})
		}
	}
	t.Logf("%d changes; settled on %d objects served, %d shadowed", changes, len(served), len(errs))
}
