package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// filterEnv is a real API server (internal/kubetest) and helpers that
// write to it.
type filterEnv struct {
	t   *testing.T
	c   *kubetest.Cluster
	ctx context.Context
}

func newFilterEnv(t *testing.T) *filterEnv {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &filterEnv{t: t, c: kubetest.Start(t, kubetest.Options{IstioCRDs: true}), ctx: ctx}
}

func (e *filterEnv) check(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// run starts a KubeSource on the cluster and waits for its initial sync.
func (e *filterEnv) run(opts KubeSourceOptions) (*KubeSource, *index.Writer) {
	e.t.Helper()
	w := index.NewWriter()
	opts.Client, opts.Istio = e.c.Client, e.c.Istio
	opts.BatchWindow, opts.DiscoveryInterval = time.Millisecond, 50*time.Millisecond
	s := NewKubeSource(w, opts)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	e.waitFor("initial sync", func() string {
		if !s.Synced() {
			return "not synced"
		}
		return ""
	})
	return s, w
}

// waitFor polls cond (which returns what is still wrong) until it returns
// "" or the test's deadline passes.
func (e *filterEnv) waitFor(what string, cond func() string) {
	e.t.Helper()
	var last string
	for {
		if last = cond(); last == "" {
			return
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("%s: %s", what, last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (e *filterEnv) namespace(name string, labels map[string]string) {
	e.t.Helper()
	c := e.c.Client.CoreV1().Namespaces()
	ns, err := c.Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		_, err = c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		e.check(err)
		return
	}
	ns.Labels = labels
	_, err = c.Update(e.ctx, ns, metav1.UpdateOptions{})
	e.check(err)
}

// vs creates or relabels VirtualService ns/name.
func (e *filterEnv) vs(ns, name string, labels map[string]string) {
	e.t.Helper()
	c := e.c.Istio.NetworkingV1().VirtualServices(ns)
	cur, err := c.Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		_, err = c.Create(e.ctx, &networkingv1.VirtualService{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: networking.VirtualService{Hosts: []string{name + "." + ns + ".svc.cluster.local"},
				Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{
					Destination: &networking.Destination{Host: name + "." + ns + ".svc.cluster.local"}}}}}},
		}, metav1.CreateOptions{})
		e.check(err)
		return
	}
	cur.Labels = labels
	_, err = c.Update(e.ctx, cur, metav1.UpdateOptions{})
	e.check(err)
}

// workload creates, in ns, Service web with an EndpointSlice of one
// address and a ready Pod with that address.
func (e *filterEnv) workload(ns, ip string) {
	e.t.Helper()
	_, err := e.c.Client.CoreV1().Services(ns).Create(e.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	e.check(err)
	_, err = e.c.Client.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{labelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}, metav1.CreateOptions{})
	e.check(err)
	pod, err := e.c.Client.CoreV1().Pods(ns).Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}, metav1.CreateOptions{})
	e.check(err)
	pod.Status = corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = e.c.Client.CoreV1().Pods(ns).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{})
	e.check(err)
}

// indexed lists, sorted, what the index holds of namespaces prefixed
// "f-": "ns/<name>", "svc/<ns>", "eps/<ns>/<count>", "pod/<ns>/<name>",
// "vs/<ns>/<name>".
func indexed(w *index.Writer) string {
	s := w.Snapshot()
	var out []string
	ours := func(ns index.Sym) bool { return strings.HasPrefix(s.String(ns), "f-") }
	s.Namespaces(func(n *index.Namespace) bool {
		if ours(n.Name) {
			out = append(out, "ns/"+s.String(n.Name))
		}
		return true
	})
	s.Services(func(_ index.ServiceID, v *index.Service) bool {
		if ours(v.Key.Namespace) {
			out = append(out, "svc/"+s.String(v.Key.Namespace))
			if eps := s.Endpoints(v.Key); eps != nil {
				out = append(out, fmt.Sprintf("eps/%s/%d", s.String(v.Key.Namespace), eps.Len()))
			}
		}
		return true
	})
	s.Workloads(func(wl *index.Workload) bool {
		if ours(wl.Key.Namespace) {
			out = append(out, "pod/"+s.String(wl.Key.Namespace)+"/"+s.String(wl.Key.Name))
		}
		return true
	})
	s.Configs(index.ConfigVirtualService, func(c *index.Config) bool {
		out = append(out, "vs/"+s.String(c.Key.Namespace)+"/"+s.String(c.Key.Name))
		return true
	})
	slices.Sort(out)
	return strings.Join(out, " ")
}

func wantIndexed(w *index.Writer, want string) func() string {
	return func() string {
		if got := indexed(w); got != want {
			return fmt.Sprintf("index holds\n  %s\nwant\n  %s", got, want)
		}
		return ""
	}
}

func errorsText(s *KubeSource) string {
	var b strings.Builder
	for _, err := range s.Errors() {
		b.WriteString(err.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestKubeRevisionSelectsConfig checks istiod's istio.io/rev rule for
// config against a real API server: a source of revision "canary" reads
// unlabelled VirtualServices and those labelled canary, not those of
// another revision (listed in one warning of Errors), nor one labelled
// with a revision tag of canary (a real istio-revision-tag-prod webhook),
// as in istiod; relabelling moves an object out of the index and back; a
// source without a revision reads them all, and one of revision "default"
// reads the unlabelled and "default" ones only.
func TestKubeRevisionSelectsConfig(t *testing.T) {
	e := newFilterEnv(t)
	e.namespace("f-shop", nil)
	e.vs("f-shop", "plain", nil)
	e.vs("f-shop", "mine", map[string]string{"istio.io/rev": "canary"})
	e.vs("f-shop", "other", map[string]string{"istio.io/rev": "stable"})
	e.vs("f-shop", "dflt", map[string]string{"istio.io/rev": "default"})
	// prod is a revision tag of canary (istioctl tag set prod --revision
	// canary): tags do not select config, in istiod either.
	_, err := e.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx,
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "istio-revision-tag-prod",
			Labels: map[string]string{"istio.io/tag": "prod", "istio.io/rev": "canary"}}}, metav1.CreateOptions{})
	e.check(err)
	e.vs("f-shop", "tagged", map[string]string{"istio.io/rev": "prod"})

	canary, cw := e.run(KubeSourceOptions{Revision: "canary"})
	_, aw := e.run(KubeSourceOptions{})
	_, dw := e.run(KubeSourceOptions{Revision: "default"})
	e.waitFor("revision canary", wantIndexed(cw, "ns/f-shop vs/f-shop/mine vs/f-shop/plain"))
	e.waitFor("no revision", wantIndexed(aw, "ns/f-shop vs/f-shop/dflt vs/f-shop/mine vs/f-shop/other vs/f-shop/plain vs/f-shop/tagged"))
	e.waitFor("revision default", wantIndexed(dw, "ns/f-shop vs/f-shop/dflt vs/f-shop/plain"))
	const note = `kubernetes: warning: 3 Istio objects are not read: labelled for another revision than this control plane's "canary": ` +
		`VirtualService f-shop/dflt (istio.io/rev=default), VirtualService f-shop/other (istio.io/rev=stable), ` +
		`VirtualService f-shop/tagged (istio.io/rev=prod)`
	if got := errorsText(canary); !strings.Contains(got, note) {
		t.Errorf("Errors:\n%s\nwant a line\n%s", got, note)
	}

	// Relabelled away, relabelled to it, and unlabelled.
	e.vs("f-shop", "mine", map[string]string{"istio.io/rev": "stable"})
	e.vs("f-shop", "other", map[string]string{"istio.io/rev": "canary"})
	e.vs("f-shop", "dflt", nil)
	e.waitFor("relabelled", wantIndexed(cw, "ns/f-shop vs/f-shop/dflt vs/f-shop/other vs/f-shop/plain"))
	e.waitFor("relabelled, default", wantIndexed(dw, "ns/f-shop vs/f-shop/dflt vs/f-shop/plain"))
	e.waitFor("the warning follows", func() string {
		if got := errorsText(canary); !strings.Contains(got, "2 Istio objects are not read") || !strings.Contains(got, "f-shop/mine (istio.io/rev=stable)") {
			return "Errors:\n" + got
		}
		return ""
	})
	// The spec of an object of another revision is not cached, and comes
	// back whole when it is relabelled: the converted row has its route.
	e.vs("f-shop", "mine", nil)
	e.waitFor("mine back", wantIndexed(cw, "ns/f-shop vs/f-shop/dflt vs/f-shop/mine vs/f-shop/other vs/f-shop/plain"))
	s := cw.Snapshot()
	mine, ok := s.Symbols.Lookup("mine")
	ns, _ := s.Symbols.Lookup("f-shop")
	c, found := s.Config(index.ConfigVirtualService, index.ConfigKey{Namespace: ns, Name: mine})
	if !ok || !found || len(c.Spec.(*networking.VirtualService).GetHttp()) != 1 {
		t.Errorf("VirtualService mine after relabelling: %v", c)
	}
	e.check(e.c.Istio.NetworkingV1().VirtualServices("f-shop").Delete(e.ctx, "tagged", metav1.DeleteOptions{}))
	e.waitFor("nothing skipped", func() string {
		if got := errorsText(canary); strings.Contains(got, "not read") {
			return "Errors:\n" + got
		}
		return ""
	})
}

// TestKubeDiscoverySelectors checks discoverySelectors against a real API
// server: only the selected namespaces' Services, EndpointSlices, Pods,
// Istio config and Namespace rows are indexed; a change of the selectors
// (SetDiscoverySelectors) and a namespace relabelled into or out of
// selection add and remove them, each in one index version.
func TestKubeDiscoverySelectors(t *testing.T) {
	e := newFilterEnv(t)
	e.namespace("f-a", map[string]string{"team": "x"})
	e.namespace("f-b", map[string]string{"team": "y"})
	e.namespace("f-c", nil)
	for i, ns := range []string{"f-a", "f-b", "f-c"} {
		e.workload(ns, fmt.Sprintf("10.9.0.%d", i+1))
		e.vs(ns, "route", nil)
	}
	all := func(ns ...string) string {
		var out []string
		for _, n := range ns {
			out = append(out, "eps/"+n+"/1", "ns/"+n, "pod/"+n+"/web-1", "svc/"+n, "vs/"+n+"/route")
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	team := func(values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: values}}}
	}

	s, w := e.run(KubeSourceOptions{DiscoverySelectors: []*metav1.LabelSelector{team("x")}})
	e.waitFor("initial selectors", wantIndexed(w, all("f-a")))
	if got := errorsText(s); !strings.Contains(got, "discoverySelectors select 1 of") || !strings.Contains(got, "f-b, f-c") {
		t.Errorf("Errors:\n%s\nwant the namespaces not read", got)
	}

	// Each change lands in one index version (the test cluster has no
	// controllers: nothing else writes).
	oneVersion := func(what, want string, change func()) {
		t.Helper()
		before := w.Snapshot().Version
		change()
		e.waitFor(what, wantIndexed(w, want))
		if v := w.Snapshot().Version; v != before+1 {
			t.Errorf("%s: index version %d → %d, want one change set", what, before, v)
		}
	}
	oneVersion("selectors widened", all("f-a", "f-b"), func() {
		e.check(s.SetDiscoverySelectors([]*metav1.LabelSelector{team("x"), {MatchLabels: map[string]string{"team": "y"}}}))
	})
	oneVersion("namespace relabelled into selection", all("f-a", "f-b", "f-c"), func() {
		e.namespace("f-c", map[string]string{"team": "x"})
	})
	oneVersion("namespace relabelled out of selection", all("f-b", "f-c"), func() {
		e.namespace("f-a", map[string]string{"team": "z"})
	})
	oneVersion("selectors narrowed", all("f-b"), func() {
		e.check(s.SetDiscoverySelectors([]*metav1.LabelSelector{team("y")}))
	})
	if err := s.SetDiscoverySelectors([]*metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "team", Operator: "Near"}}}}); err == nil || !strings.Contains(err.Error(), "discoverySelectors[0]") {
		t.Errorf("invalid selector: %v", err)
	}
	// Objects created in a namespace that is not selected stay out; the
	// invalid selector changed nothing.
	e.vs("f-a", "late", nil)
	e.vs("f-b", "late", nil)
	e.waitFor("late objects", wantIndexed(w, sortedWords(all("f-b")+" vs/f-b/late")))
	oneVersion("no selectors: every namespace", sortedWords(all("f-a", "f-b", "f-c")+" vs/f-a/late vs/f-b/late"), func() {
		e.check(s.SetDiscoverySelectors(nil))
	})
	if got := errorsText(s); strings.Contains(got, "discoverySelectors") {
		t.Errorf("Errors with every namespace read:\n%s", got)
	}
}

func sortedWords(s string) string {
	f := strings.Fields(s)
	slices.Sort(f)
	return strings.Join(f, " ")
}

// TestKubeDiscoverySelectorsChurn relabels a namespace into selection
// while one of its objects keeps changing: whatever the order of the
// watch's events, the stub refetch and the batches, the index ends with
// the object's last version (never an older one).
func TestKubeDiscoverySelectorsChurn(t *testing.T) {
	e := newFilterEnv(t)
	e.namespace("f-churn", nil)
	e.vs("f-churn", "moving", nil)
	_, w := e.run(KubeSourceOptions{DiscoverySelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"team": "x"}}}})
	c := e.c.Istio.NetworkingV1().VirtualServices("f-churn")
	const rounds = 40
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= rounds; i++ {
			vs, err := c.Get(e.ctx, "moving", metav1.GetOptions{})
			if err == nil {
				vs.Spec.Http[0].Route[0].Destination.Subset = fmt.Sprint(i)
				_, err = c.Update(e.ctx, vs, metav1.UpdateOptions{})
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range 7 { // in, out, in, ...: ends selected
		labels := map[string]string{"team": "x"}
		if i%2 == 1 {
			labels = nil
		}
		e.namespace("f-churn", labels)
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.waitFor("the last version", func() string {
		s := w.Snapshot()
		ns, _ := s.Symbols.Lookup("f-churn")
		name, _ := s.Symbols.Lookup("moving")
		cfg, ok := s.Config(index.ConfigVirtualService, index.ConfigKey{Namespace: ns, Name: name})
		if !ok {
			return "not indexed"
		}
		if got := cfg.Spec.(*networking.VirtualService).Http[0].Route[0].Destination.Subset; got != fmt.Sprint(rounds) {
			return "subset " + got
		}
		return ""
	})
}
