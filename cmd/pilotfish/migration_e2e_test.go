package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// The two control planes' names as injected pods know them: the
// discoveryAddress and CA_ADDR of istiod's chart (revision default) and of
// pilotfish's chart with serviceName=pilotfish.
const (
	istiodAddress    = "istiod.istio-system.svc:15012"
	pilotfishAddress = "pilotfish.istio-system.svc:15012"
)

// migrationWorkload is an injected pod with the certificate it got.
type migrationWorkload struct {
	pod  *corev1.Pod
	id   string // its SPIFFE ID
	cp   string // the control plane it was pointed at (discoveryAddress)
	cert *workloadCert
}

// migrationEnv is the cluster of TestMigrationFromIstiod: one API server,
// istiod (revision default) and pilotfish (revision pilotfish) under one
// root, each with its own intermediate.
type migrationEnv struct {
	t     *testing.T
	ctx   context.Context
	c     *kubetest.Cluster
	pki   *meshPKI
	dial  map[string]string            // discoveryAddress -> loopback address of that TLS port
	inter map[string]*x509.Certificate // discoveryAddress -> its intermediate CA
	// selects: pilotfish reads only the Istio config of its revision
	// (--revision, istiod's istio.io/rev rules).
	selects bool
}

// TestMigrationFromIstiod moves a namespace from istiod to pilotfish and
// back in one real kube-apiserver, as docs/migration.md tells an operator
// to: the real istiod (pilot-discovery built from the pinned istio, revision
// default, plug-in CA from cacerts) and `pilotfish serve --inject-revision
// pilotfish` (its CA from a cacerts directory) run side by side, one root
// with an intermediate each; istiod's injection webhooks (istio's chart)
// and pilotfish's chart's (revision pilotfish, revision tag prod, caBundle
// left for pilotfish's leader to write) are registered with the API
// server. It asserts:
//   - a pod in namespace A (istio-injection=enabled) is injected by istiod,
//     one in B (istio.io/rev=pilotfish) and one in C (istio.io/rev=prod, the
//     tag) by pilotfish: the sidecar.istio.io/status revision, CA_ADDR and
//     PROXY_CONFIG's discoveryAddress name their control plane;
//   - each workload gets a certificate from the CA its CA_ADDR names (its
//     service account token, TLS checked against the root): its SPIFFE ID,
//     signed by that control plane's intermediate, chaining to the root;
//   - each control plane's xDS for its workload (an ADS stream over mTLS
//     with that certificate, the node as istio-agent builds it from the
//     injected pod) has the outbound cluster to the other namespace's
//     service with ISTIO_MUTUAL to the other's SPIFFE ID and roots from
//     SDS ROOTCA, and an inbound listener on the service port that requires
//     client certificates (PeerAuthentication STRICT) and whose RBAC allows
//     the other's principal (AuthorizationPolicy); the two certificates
//     complete an mTLS handshake checking exactly those identities;
//   - `istioctl tag set canary --revision pilotfish` makes from the chart's
//     revision webhook the webhooks the chart renders for a tag, and a pod
//     in a namespace labelled istio.io/rev=canary is injected by pilotfish;
//   - after relabelling A to istio.io/rev=pilotfish, a new pod in A is
//     injected by and served by pilotfish with the same checks against B;
//     relabelled back (rollback), a new pod in A is istiod's again;
//   - a VirtualService labelled istio.io/rev=default is applied by istiod
//     and one labelled istio.io/rev=pilotfish is not; with pilotfish's
//     --revision (config selection), the reverse holds for pilotfish; one
//     labelled with pilotfish's tag (prod) is applied by neither (istiod
//     compares the label with its revision only, tags do not select
//     config).
//
// Skipped when pilot-discovery, helm or istioctl is not built (failed under
// $CI).
func TestMigrationFromIstiod(t *testing.T) {
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	istiodBin := builtTool(t, filepath.Join(root, ".cache", "bin", "pilot-discovery"), "make pilot-discovery")
	helmBin := builtTool(t, filepath.Join(root, ".cache", "bin", "helm"), "make helm")
	istioctlBin := builtTool(t, filepath.Join(root, ".cache", "bin", "istioctl"), "make istioctl")
	began := time.Now()
	defer func() { t.Logf("migration test took %v", time.Since(began).Round(time.Second)) }()
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := &migrationEnv{t: t, ctx: ctx, c: c, pki: newMeshPKI(t)}
	istiodCA, istiodInter := e.pki.intermediate(t, "istiod intermediate")
	pfCA, pfInter := e.pki.intermediate(t, "pilotfish intermediate")
	e.inter = map[string]*x509.Certificate{istiodAddress: istiodInter, pilotfishAddress: pfInter}
	c.EnsureNamespace(t, "istio-system")

	// istiod's ConfigMaps: istio's chart defaults (inject's corpus data).
	def := filepath.Join(chartDir, "default")
	e.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio", Namespace: "istio-system"},
		Data: map[string]string{"mesh": string(mustRead(t, filepath.Join(def, "mesh.yaml")))}})
	e.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector", Namespace: "istio-system"},
		Data: map[string]string{"config": string(mustRead(t, filepath.Join(def, "config.yaml"))), "values": string(mustRead(t, filepath.Join(def, "values.json")))}})
	// pilotfish's: its chart with a revision, next to istiod.
	rendered := helmTemplate(t, helmBin, filepath.Join(root, "deploy", "charts", "pilotfish"),
		"--set", "revision=pilotfish", "--set", "serviceName=pilotfish", "--set", "revisionTags={prod}")
	cms := renderedObjects[corev1.ConfigMap](t, rendered, "ConfigMap")
	for _, name := range []string{"istio-pilotfish", "istio-sidecar-injector-pilotfish"} {
		if cms[name] == nil {
			t.Fatalf("the chart renders no ConfigMap %s", name)
		}
		e.apply(cms[name])
	}

	ports := freeTCPPorts(t, 9)
	dir := t.TempDir()
	startChild(t, ctx, dir, "istiod", []string{istiodBin, "discovery", "--kubeconfig", c.Kubeconfig,
		"--meshConfig", filepath.Join(def, "mesh.yaml"), "--networksConfig", filepath.Join(dir, "missing"),
		"--domain", "cluster.local", "--grpcAddr", addrOf(ports[0]), "--secureGRPCAddr", addrOf(ports[1]),
		"--httpAddr", addrOf(ports[2]), "--httpsAddr", addrOf(ports[3]), "--monitoringAddr", addrOf(ports[4]),
		"--ctrlz_address", "127.0.0.1", "--ctrlz_port", strconv.Itoa(ports[5]), "--keepaliveMaxServerConnectionAge", "1000h"},
		"POD_NAMESPACE=istio-system", "POD_NAME=istiod-local", "REVISION=default", "CLUSTER_ID=Kubernetes",
		"INJECTION_WEBHOOK_CONFIG_NAME=", "VALIDATION_WEBHOOK_CONFIG_NAME=", "ISTIOD_CUSTOM_HOST=localhost",
		"ROOT_CA_DIR="+istiodCA, "PILOT_ENABLE_GATEWAY_API=false", "GOMAXPROCS=2")

	pf := filepath.Join(dir, "pilotfish")
	if out, err := exec.CommandContext(ctx, "go", "build", "-tags", "vtprotobuf", "-o", pf, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, _ := exec.CommandContext(ctx, pf, "serve", "--help").CombinedOutput()
	e.selects = bytes.Contains(help, []byte("--revision "))
	startChild(t, ctx, dir, "pilotfish", []string{pf, "serve", "--kubeconfig", c.Kubeconfig, "--token-review-kubeconfig", c.Kubeconfig,
		"--cacerts-dir", pfCA, "--grpc-addr", "127.0.0.1:0", "--grpc-tls-addr", addrOf(ports[6]), "--http-addr", addrOf(ports[7]),
		"--webhook-addr", addrOf(ports[8]), "--tls-san", "127.0.0.1", "--tls-san", "pilotfish.istio-system.svc",
		"--inject-revision", "pilotfish", "--inject-namespace", "istio-system", "--inject-webhook-cabundle",
		"--leader-election-namespace", "istio-system", "--log-level", "info"},
		"POD_NAMESPACE=istio-system", "POD_NAME=pilotfish-0", "GOMAXPROCS=2")
	waitHTTP(t, ctx, "http://"+addrOf(ports[2])+"/ready")
	waitHTTP(t, ctx, "http://"+addrOf(ports[7])+"/ready")
	e.dial = map[string]string{istiodAddress: addrOf(ports[1]), pilotfishAddress: addrOf(ports[6])}

	// The injection webhooks: istiod's (istio's chart) calling istiod with
	// the root as caBundle; the chart's calling pilotfish, their caBundle
	// left empty for pilotfish's leader to fill.
	var istiodHooks admissionregv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(mustRead(t, filepath.Join(chartDir, "webhook.yaml")), &istiodHooks); err != nil {
		t.Fatal(err)
	}
	e.registerWebhooks(&istiodHooks, "https://localhost:"+strconv.Itoa(ports[3])+"/inject", e.pki.rootPEM)
	ours := renderedObjects[admissionregv1.MutatingWebhookConfiguration](t, rendered, "MutatingWebhookConfiguration")
	for _, name := range []string{"istio-sidecar-injector-pilotfish", "istio-revision-tag-prod"} {
		if ours[name] == nil {
			t.Fatalf("the chart renders no MutatingWebhookConfiguration %s", name)
		}
		e.registerWebhooks(ours[name], "https://127.0.0.1:"+strconv.Itoa(ports[8])+"/inject", nil)
	}
	eventuallyFor(t, time.Minute, "pilotfish's leader writes the root into its revision's webhooks", func() string {
		for name := range ours {
			cfg, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			for _, w := range cfg.Webhooks {
				if !bytes.Equal(bytes.TrimSpace(w.ClientConfig.CABundle), bytes.TrimSpace(e.pki.rootPEM)) {
					return name + "/" + w.Name + " lacks the root"
				}
			}
		}
		return ""
	})

	e.namespace("ns-a", map[string]string{"istio-injection": "enabled"})
	e.namespace("ns-b", map[string]string{"istio.io/rev": "pilotfish"})
	e.namespace("ns-c", map[string]string{"istio.io/rev": "prod"})
	e.kubectlApply(meshConfigYAML)

	a1 := e.workload("ns-a", "a-1", "10.20.0.1", istiodAddress)
	b1 := e.workload("ns-b", "b-1", "10.20.1.1", pilotfishAddress)
	e.workload("ns-c", "c-1", "10.20.2.1", pilotfishAddress) // through the tag
	e.checkPair(a1, b1)

	// A tag set by istioctl on pilotfish's revision has the chart's tag
	// webhooks, and injects through pilotfish.
	e.istioctlTag(istioctlBin)
	e.namespace("ns-d", map[string]string{"istio.io/rev": "canary"})
	e.workload("ns-d", "d-1", "10.20.3.1", pilotfishAddress)

	// Migration: A moves to pilotfish; a new pod there is pilotfish's.
	if out, err := c.Kubectl(t, "label", "namespace", "ns-a", "istio-injection-", "istio.io/rev=pilotfish", "--overwrite"); err != nil {
		t.Fatalf("relabel: %v\n%s", err, out)
	}
	a2 := e.workload("ns-a", "a-2", "10.20.0.2", pilotfishAddress)
	e.checkPair(a2, b1)

	// Rollback: A back to istiod.
	if out, err := c.Kubectl(t, "label", "namespace", "ns-a", "istio.io/rev-", "istio-injection=enabled", "--overwrite"); err != nil {
		t.Fatalf("relabel: %v\n%s", err, out)
	}
	a3 := e.workload("ns-a", "a-3", "10.20.0.3", istiodAddress)
	e.checkPair(a3, b1)
	if !e.selects {
		t.Log("pilotfish has no --revision flag yet: its revision-scoped config checks were not run")
	}
}

// meshConfigYAML: a service per namespace, STRICT mTLS in A and B, each
// allowing the other's workload, and a VirtualService per revision and
// one labelled with the tag prod.
const meshConfigYAML = `
apiVersion: v1
kind: Service
metadata: {name: svc-a, namespace: ns-a}
spec: {selector: {app: a}, ports: [{name: http, port: 8080, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: svc-b, namespace: ns-b}
spec: {selector: {app: b}, ports: [{name: http, port: 8080, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: svc-c, namespace: ns-c}
spec: {selector: {app: c}, ports: [{name: http, port: 8080, targetPort: 8080}]}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict, namespace: ns-a}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict, namespace: ns-b}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: from-b, namespace: ns-a}
spec: {action: ALLOW, rules: [{from: [{source: {principals: [cluster.local/ns/ns-b/sa/app-b]}}]}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: from-a, namespace: ns-b}
spec: {action: ALLOW, rules: [{from: [{source: {principals: [cluster.local/ns/ns-a/sa/app-a]}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: to-a, namespace: ns-a, labels: {istio.io/rev: default}}
spec:
  hosts: [svc-a.ns-a.svc.cluster.local]
  http: [{timeout: 13s, route: [{destination: {host: svc-a.ns-a.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: to-b, namespace: ns-b, labels: {istio.io/rev: pilotfish}}
spec:
  hosts: [svc-b.ns-b.svc.cluster.local]
  http: [{timeout: 17s, route: [{destination: {host: svc-b.ns-b.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: to-c, namespace: ns-c, labels: {istio.io/rev: prod}}
spec:
  hosts: [svc-c.ns-c.svc.cluster.local]
  http: [{timeout: 19s, route: [{destination: {host: svc-c.ns-c.svc.cluster.local}}]}]
`

// workload creates pod name in ns (service account app-<x>, label app=<x>
// for namespace ns-<x>), checks that the control plane at want injected it
// and pointed it at itself, publishes it as ready at ip behind its
// namespace's service, and gets its certificate from the CA its CA_ADDR
// names.
func (e *migrationEnv) workload(ns, name, ip, want string) *migrationWorkload {
	t := e.t
	t.Helper()
	app := strings.TrimPrefix(ns, "ns-")
	sa := "app-" + app
	rev := map[string]string{istiodAddress: "default", pilotfishAddress: "pilotfish"}[want]
	pods := e.c.Client.CoreV1().Pods(ns)
	var p *corev1.Pod
	// The API server sees webhook and namespace label changes through
	// informers: a pod admitted by the previous owner is deleted and made
	// again.
	eventuallyFor(t, time.Minute, ns+"/"+name+" injected by revision "+rev, func() string {
		_ = pods.Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		var err error
		p, err = pods.Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "app", Image: "nginx",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}, metav1.CreateOptions{})
		if err != nil {
			return err.Error()
		}
		var st struct {
			Revision string `json:"revision"`
		}
		_ = json.Unmarshal([]byte(p.Annotations["sidecar.istio.io/status"]), &st)
		if st.Revision != rev {
			return fmt.Sprintf("injected by revision %q", st.Revision)
		}
		return ""
	})
	proxy := container(p, "istio-proxy")
	if proxy == nil {
		t.Fatalf("%s/%s has no istio-proxy", ns, name)
	}
	env := map[string]string{}
	for _, v := range proxy.Env {
		env[v.Name] = v.Value
	}
	var pc struct {
		DiscoveryAddress string `json:"discoveryAddress"`
	}
	if err := json.Unmarshal([]byte(env["PROXY_CONFIG"]), &pc); err != nil {
		t.Fatalf("%s/%s PROXY_CONFIG %q: %v", ns, name, env["PROXY_CONFIG"], err)
	}
	if pc.DiscoveryAddress == "" {
		// Left out when it is istio-agent's default (istiod's, istiod in
		// istio-system).
		pc.DiscoveryAddress = istiodAddress
	}
	if pc.DiscoveryAddress != want || env["CA_ADDR"] != want {
		t.Fatalf("%s/%s (revision %s) points at discoveryAddress %q, CA_ADDR %q; want %s", ns, name, rev, pc.DiscoveryAddress, env["CA_ADDR"], want)
	}

	// Running and ready at ip, behind the namespace's service.
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	var err error
	if p, err = pods.UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.apply(endpointSlice(ns, "svc-"+app, name, ip))

	w := &migrationWorkload{pod: p, id: "spiffe://cluster.local/ns/" + ns + "/sa/" + sa, cp: want}
	token := e.c.ServiceAccountToken(t, ns, sa, []string{"istio-ca"})
	if w.cert, err = e.pki.requestCert(e.ctx, env["CA_ADDR"], e.dial[env["CA_ADDR"]], token, w.id); err != nil {
		t.Fatal(err)
	}
	if err := w.cert.check(e.pki, w.id, e.inter[want]); err != nil {
		t.Fatalf("%s/%s: %v", ns, name, err)
	}
	return w
}

// checkPair asserts that each workload's control plane lets it reach the
// other with ISTIO_MUTUAL and accept the other's calls, and that their
// certificates complete that handshake.
func (e *migrationEnv) checkPair(x, y *migrationWorkload) {
	t := e.t
	t.Helper()
	for _, w := range []struct{ self, peer *migrationWorkload }{{x, y}, {y, x}} {
		e.checkXDS(w.self, w.peer)
	}
	if err := mtlsHandshake(e.pki, x.cert, y.cert, y.id, x.id); err != nil {
		t.Fatalf("%s -> %s: %v", x.id, y.id, err)
	}
	if err := mtlsHandshake(e.pki, y.cert, x.cert, x.id, y.id); err != nil {
		t.Fatalf("%s -> %s: %v", y.id, x.id, err)
	}
}

func (e *migrationEnv) checkXDS(self, peer *migrationWorkload) {
	t := e.t
	t.Helper()
	node, err := podNode(self.pod, container(self.pod, "istio-proxy"))
	if err != nil {
		t.Fatal(err)
	}
	peerNS := peer.pod.Namespace
	peerHost := "svc-" + strings.TrimPrefix(peerNS, "ns-") + "." + peerNS + ".svc.cluster.local"
	cluster := "outbound|8080||" + peerHost
	eventuallyFor(t, 90*time.Second, self.id+" served by "+self.cp, func() string {
		x, err := fetchXDS(e.ctx, e.pki, self.cp, e.dial[self.cp], self.cert, node, "8080")
		if err != nil {
			return err.Error()
		}
		c := x.clusters[cluster]
		if c == nil {
			return "no cluster " + cluster
		}
		sans, roots := upstreamMTLS(c)
		if !slices.Contains(sans, peer.id) || !slices.Contains(roots, "ROOTCA") {
			return fmt.Sprintf("cluster %s: mTLS SANs %v, roots from %v; want %s from ROOTCA", cluster, sans, roots, peer.id)
		}
		in := x.listeners["virtualInbound"]
		if in == nil {
			return "no virtualInbound listener"
		}
		chains, mtls, rbacs := inboundPort(in, 8080)
		if chains == 0 || !mtls {
			return fmt.Sprintf("inbound port 8080: %d filter chains, all require mTLS from ROOTCA: %v", chains, mtls)
		}
		if !rbacAllows(rbacs, peer.id) {
			return fmt.Sprintf("inbound port 8080: no RBAC policy allows %s (%d filters)", peer.id, len(rbacs))
		}
		// Config by revision: to-a is istiod's (istio.io/rev=default),
		// to-b pilotfish's.
		timeoutA, okA := routeTimeout(x, "8080", "svc-a.ns-a.svc.cluster.local")
		timeoutB, okB := routeTimeout(x, "8080", "svc-b.ns-b.svc.cluster.local")
		timeoutC, okC := routeTimeout(x, "8080", "svc-c.ns-c.svc.cluster.local")
		if !okA || !okB || !okC {
			return fmt.Sprintf("route 8080 lacks a service's virtual host (svc-a %v, svc-b %v, svc-c %v)", okA, okB, okC)
		}
		t.Logf("%s via %s: cluster %s SANs %v roots %v; inbound chains %d mtls %v rbacs %d; timeouts a=%q b=%q c=%q",
			self.id, self.cp, cluster, sans, roots, chains, mtls, len(rbacs), timeoutA, timeoutB, timeoutC)
		switch {
		case self.cp == istiodAddress && (timeoutA != "13s" || timeoutB == "17s" || timeoutC == "19s"):
			return fmt.Sprintf("istiod: svc-a timeout %q (want 13s), svc-b %q (want no 17s), svc-c %q (want no 19s)", timeoutA, timeoutB, timeoutC)
		case self.cp == pilotfishAddress && e.selects && (timeoutB != "17s" || timeoutC == "19s" || timeoutA == "13s"):
			return fmt.Sprintf("pilotfish: svc-b timeout %q (want 17s), svc-c %q (want no 19s: a tag is no revision), svc-a %q (want no 13s)", timeoutB, timeoutC, timeoutA)
		}
		return ""
	})
}

// istioctlTag runs `istioctl tag set canary --revision pilotfish` and
// checks that the webhooks istioctl made from pilotfish's revision webhook
// are those the chart renders for a tag (the chart's tag prod as stored,
// renamed).
func (e *migrationEnv) istioctlTag(istioctl string) {
	t := e.t
	t.Helper()
	cmd := exec.CommandContext(e.ctx, istioctl, "tag", "set", "canary", "--revision", "pilotfish", "--kubeconfig", e.c.Kubeconfig,
		"--istioNamespace", "istio-system", "--skip-confirmation")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("istioctl tag set: %v\n%s", err, out)
	}
	got, err := e.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(e.ctx, "istio-revision-tag-canary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chart, err := e.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(e.ctx, "istio-revision-tag-prod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["istio.io/rev"] != "pilotfish" || got.Labels["istio.io/tag"] != "canary" {
		t.Errorf("istioctl's tag webhook labels %v", got.Labels)
	}
	norm := func(ws []admissionregv1.MutatingWebhook, tag string) string {
		var out []string
		for _, w := range ws {
			w.ClientConfig, w.TimeoutSeconds = admissionregv1.WebhookClientConfig{}, nil // the chart's timeout is a value
			b, _ := json.Marshal(w)
			out = append(out, strings.ReplaceAll(string(b), `"`+tag+`"`, `"TAG"`))
		}
		return strings.Join(out, "\n")
	}
	if a, b := norm(got.Webhooks, "canary"), norm(chart.Webhooks, "prod"); a != b {
		t.Errorf("istioctl's tag webhooks differ from the chart's:\nistioctl: %s\nchart:    %s", a, b)
	}
	for _, w := range got.Webhooks {
		if w.ClientConfig.URL == nil || !strings.HasSuffix(*w.ClientConfig.URL, "/inject") ||
			!bytes.Equal(bytes.TrimSpace(w.ClientConfig.CABundle), bytes.TrimSpace(e.pki.rootPEM)) {
			t.Errorf("istioctl's tag webhook %s calls %v with another caBundle", w.Name, w.ClientConfig.URL)
		}
	}
}

func (e *migrationEnv) namespace(name string, labels map[string]string) {
	e.apply(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}

// registerWebhooks creates cfg with every webhook calling url (the API
// server cannot reach the chart's Service here) with caBundle.
func (e *migrationEnv) registerWebhooks(cfg *admissionregv1.MutatingWebhookConfiguration, url string, caBundle []byte) {
	e.t.Helper()
	for i := range cfg.Webhooks {
		if s := cfg.Webhooks[i].ClientConfig.Service; s == nil || s.Path == nil || *s.Path != "/inject" {
			e.t.Fatalf("%s/%s does not call a service's /inject: %+v", cfg.Name, cfg.Webhooks[i].Name, cfg.Webhooks[i].ClientConfig)
		}
		cfg.Webhooks[i].ClientConfig = admissionregv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
	}
	e.apply(cfg)
}

// apply creates obj.
func (e *migrationEnv) apply(obj any) {
	e.t.Helper()
	var err error
	cs := e.c.Client
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Create(e.ctx, o, metav1.CreateOptions{})
	case *admissionregv1.MutatingWebhookConfiguration:
		_, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = cs.DiscoveryV1().EndpointSlices(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("apply: %T", obj)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *migrationEnv) kubectlApply(doc string) {
	e.t.Helper()
	f := filepath.Join(e.t.TempDir(), "obj.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if out, err := e.c.Kubectl(e.t, "apply", "--server-side", "--force-conflicts", "-f", f); err != nil {
		e.t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, doc)
	}
}

func endpointSlice(ns, svc, pod, ip string) *discoveryv1.EndpointSlice {
	port, ready := int32(8080), true
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns, Labels: map[string]string{"kubernetes.io/service-name": svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: &port, Protocol: new(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: ns}}}}
}

func container(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	for i := range p.Spec.InitContainers { // a native sidecar
		if p.Spec.InitContainers[i].Name == name {
			return &p.Spec.InitContainers[i]
		}
	}
	return nil
}

// builtTool returns path, a tool `make test` builds first; absent, the
// test is skipped locally and fails under $CI.
func builtTool(t *testing.T, path, how string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: `make test` builds it first (%s)", err, how)
		}
		t.Skipf("%v: run `%s` (make test does)", err, how)
	}
	return path
}

// helmTemplate renders chart into istio-system with a private Helm home.
func helmTemplate(t *testing.T, helm, chart string, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm, append([]string{"template", "pilotfish", chart, "--namespace", "istio-system"}, args...)...)
	cmd.Env = []string{"HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_DATA_HOME=" + home}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// renderedObjects returns the objects of kind in a rendered chart, by
// name.
func renderedObjects[T any](t *testing.T, rendered []byte, kind string) map[string]*T {
	t.Helper()
	out := map[string]*T{}
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var meta metav1.PartialObjectMetadata
		if yaml.Unmarshal(doc, &meta) != nil || meta.Kind != kind {
			continue
		}
		var o T
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			t.Fatalf("%s %s: %v", kind, meta.Name, err)
		}
		out[meta.Name] = &o
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
