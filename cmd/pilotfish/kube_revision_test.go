package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestRevisionFlagAlias checks that --inject-revision, the flag's name
// before it selected config too, still sets the revision, with a
// deprecation notice, and that --revision and $REVISION set it.
func TestRevisionFlagAlias(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      string
		notice    bool
	}{
		{name: "revision", args: []string{"--revision=canary"}, want: "canary"},
		{name: "deprecated alias", args: []string{"--inject-revision=canary"}, want: "canary", notice: true},
		{name: "env", env: "stable", want: "stable"},
		{name: "flag over env", env: "stable", args: []string{"--revision=canary"}, want: "canary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("REVISION", tc.env)
			var o injectOptions
			f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			var out bytes.Buffer
			f.SetOutput(&out)
			addInjectFlags(f, &o)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if o.revision != tc.want {
				t.Errorf("revision = %q, want %q", o.revision, tc.want)
			}
			if got := strings.Contains(out.String(), "--inject-revision has been deprecated, use --revision"); got != tc.notice {
				t.Errorf("deprecation notice %v, want %v: %q", got, tc.notice, out.String())
			}
		})
	}
}

// TestKubeRevisionRoutes runs serve with --revision=canary against a real
// API server holding two VirtualServices for echo, one labelled
// istio.io/rev=canary (to subset v1) and one labelled for revision stable
// (to v2): a proxyless gRPC client is routed by the canary one only, and
// by the other once the labels are swapped; /debug/config_errors names the
// object not read.
func TestKubeRevisionRoutes(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	m := newKubeMesh(t, c, true)
	vsc := c.Istio.NetworkingV1().VirtualServices(kubeNS)
	vs := func(name, subset, rev string) {
		t.Helper()
		cur, err := vsc.Get(m.ctx(), name, metav1.GetOptions{})
		if err == nil {
			cur.Labels = map[string]string{"istio.io/rev": rev}
			_, err = vsc.Update(m.ctx(), cur, metav1.UpdateOptions{})
			m.check(err)
			return
		}
		_, err = vsc.Create(m.ctx(), &networkingv1.VirtualService{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kubeNS, Labels: map[string]string{"istio.io/rev": rev}},
			Spec: networking.VirtualService{Hosts: []string{"echo.shop.svc.cluster.local"},
				Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{
					{Destination: &networking.Destination{Host: "echo.shop.svc.cluster.local", Subset: subset}}}}}},
		}, metav1.CreateOptions{})
		m.check(err)
	}
	vs("echo-to-v1", "v1", "canary")
	vs("echo-to-v2", "v2", "stable")

	s := startKubeServe(t, c.Kubeconfig, func(o *serveOptions) { o.inject.revision = "canary" })
	h := grpcClient(t, s.grpc)
	eventually(t, "routed by the canary VirtualService", func() string { return allBy(h, "v1", 10) })
	_, body := get(t, s.http+"/debug/config_errors")
	if !bodyHas(body, `1 Istio objects are not read: labelled for another revision than this control plane's \"canary\": VirtualService shop/echo-to-v2 (istio.io/rev=stable)`) {
		t.Errorf("/debug/config_errors: %s", body)
	}

	vs("echo-to-v1", "", "stable")
	vs("echo-to-v2", "", "canary")
	eventually(t, "routed by the relabelled VirtualService", func() string { return allBy(h, "v2", 10) })
	eventually(t, "config_errors follows", func() string {
		if _, body := get(t, s.http+"/debug/config_errors"); !bodyHas(body, "VirtualService shop/echo-to-v1 (istio.io/rev=stable)") {
			return string(body)
		}
		return ""
	})
}
