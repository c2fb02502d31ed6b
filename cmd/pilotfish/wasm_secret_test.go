package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

const (
	wasmSecretPlugin  = "extensions.istio.io/trafficextension/shop.private~istio-translated-wasmplugin"
	wasmPublicPlugin  = "extensions.istio.io/trafficextension/shop.public~istio-translated-wasmplugin"
	wasmRootPlugin    = "extensions.istio.io/trafficextension/istio-system.mesh~istio-translated-wasmplugin"
	wasmPullSecretEnv = "ISTIO_META_WASM_IMAGE_PULL_SECRET"
)

// wasmSecretYAML: a plugin of shop naming pull secret "pull" (found in
// shop, whatever namespace the name says), one without, and one of the
// root namespace naming istio-system's "pull".
func wasmSecretYAML(shopCred, rootCred string) string {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	return `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: private, namespace: shop}
spec:
  url: oci://registry.example/private:1
  imagePullSecret: kubernetes://other/pull
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: public, namespace: shop}
spec:
  url: oci://registry.example/public:1
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: mesh, namespace: istio-system}
spec:
  url: oci://registry.example/mesh:1
  imagePullSecret: pull
---
apiVersion: v1
kind: Secret
metadata: {name: pull, namespace: shop}
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: ` + b64(shopCred) + `
  other: ` + b64("not kept") + `
---
apiVersion: v1
kind: Secret
metadata: {name: pull, namespace: istio-system}
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: ` + b64(rootCred) + `
`
}

// ecdsStream is a SotW stream asking for ECDS names as node; next returns
// each response's resources by name (raw bytes) and the VM's pull secret.
type ecdsStream struct {
	st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
}

func openECDS(t *testing.T, ctx context.Context, cc *grpc.ClientConn, n *corev3.Node, names ...string) *ecdsStream {
	t.Helper()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: engine.TypeExtensionConfig, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	return &ecdsStream{st: st}
}

type ecdsGot struct {
	raw    map[string][]byte
	secret map[string]string // the pull secret variable, by resource; absent when unset
}

func (s *ecdsStream) next(t *testing.T) ecdsGot {
	t.Helper()
	r, err := s.st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = s.st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce,
		ResourceNames: []string{wasmSecretPlugin, wasmPublicPlugin, wasmRootPlugin}})
	got := ecdsGot{raw: map[string][]byte{}, secret: map[string]string{}}
	for _, a := range r.Resources {
		got.add(t, a)
	}
	return got
}

// TestWasmPullSecretVerifiedOnly: a running pilotfish with a real ADS
// client over mTLS and over the plaintext port. As istiod (ecds.go), the
// pull secret's docker config goes only to a stream with a verified
// identity; the plaintext stream gets the variable empty; a plugin without
// a pull secret is the same bytes on both; a proxy of another namespace
// gets no plugin of shop, and the root namespace's plugin with its Secret
// (istiod sends it to any verified proxy). Rewriting the Secret pushes the
// new content to the verified stream.
func TestWasmPullSecretVerifiedOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("mesh.yaml", svcYAML)
	write("wasm.yaml", wasmSecretYAML(`{"auths":{"registry.example":{"auth":"c2hvcA=="}}}`, `{"auths":{"root":{}}}`))
	s := startIdentityServeDir(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	now := time.Now()
	leaf := func(uri string) *tls.Certificate {
		c := testcert.Leaf(t, s.caCert, s.caKey, uri, now.Add(-time.Minute), now.Add(time.Hour))
		return &c
	}
	all := []string{wasmSecretPlugin, wasmPublicPlugin, wasmRootPlugin}
	cart := xdsNode(t, "cart-0", "shop", "shop", "cart")
	verified := openECDS(t, ctx, s.dialTLS(t, leaf("spiffe://cluster.local/ns/shop/sa/cart")), cart, all...)
	plain, err := grpc.NewClient(s.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	unverified := openECDS(t, ctx, plain, xdsNode(t, "cart-1", "shop", "shop", "cart"), all...)
	billing := openECDS(t, ctx, s.dialTLS(t, leaf("spiffe://cluster.local/ns/billing/sa/pay")),
		xdsNode(t, "pay-0", "billing", "billing", "pay"), all...)

	v, u, b := verified.next(t), unverified.next(t), billing.next(t)
	if len(v.raw) != 3 || len(u.raw) != 3 {
		t.Fatalf("shop proxies got %d and %d resources, want 3", len(v.raw), len(u.raw))
	}
	if got := v.secret[wasmSecretPlugin]; got != `{"auths":{"registry.example":{"auth":"c2hvcA=="}}}` {
		t.Errorf("verified stream's pull secret = %q, want shop/pull's docker config", got)
	}
	if got, ok := u.secret[wasmSecretPlugin]; !ok || got != "" {
		t.Errorf("plaintext stream's pull secret = %q (set %v), want set and empty", got, ok)
	}
	if got := v.secret[wasmRootPlugin]; got != `{"auths":{"root":{}}}` {
		t.Errorf("verified stream's root plugin pull secret = %q, want istio-system/pull's", got)
	}
	if _, ok := v.secret[wasmPublicPlugin]; ok {
		t.Error("a plugin without imagePullSecret carries the variable")
	}
	if string(v.raw[wasmPublicPlugin]) != string(u.raw[wasmPublicPlugin]) {
		t.Error("the plugin without pull secret differs between the verified and plaintext streams: not shared")
	}
	if len(b.raw) != 1 || b.secret[wasmRootPlugin] != `{"auths":{"root":{}}}` {
		t.Errorf("billing proxy got %d resources (root secret %q); want only the root plugin, with its Secret", len(b.raw), b.secret[wasmRootPlugin])
	}

	// A second authenticated proxy of the class shares the variant's bytes;
	// a Delta stream over mTLS gets the content too, a plaintext one not.
	v2 := openECDS(t, ctx, s.dialTLS(t, leaf("spiffe://cluster.local/ns/shop/sa/cart")), xdsNode(t, "cart-2", "shop", "shop", "cart"), all...).next(t)
	if string(v2.raw[wasmSecretPlugin]) != string(v.raw[wasmSecretPlugin]) {
		t.Error("two authenticated proxies of one class got different bytes for the plugin with a pull secret")
	}
	tlsDelta := deltaECDS(t, ctx, s.dialTLS(t, leaf("spiffe://cluster.local/ns/shop/sa/cart")), xdsNode(t, "cart-3", "shop", "shop", "cart"), all)
	plainDelta := deltaECDS(t, ctx, plain, xdsNode(t, "cart-4", "shop", "shop", "cart"), all)
	if tlsDelta.secret[wasmSecretPlugin] != v.secret[wasmSecretPlugin] || len(tlsDelta.raw) != 3 {
		t.Errorf("Delta over mTLS: %d resources, pull secret %q; want 3 and shop/pull's", len(tlsDelta.raw), tlsDelta.secret[wasmSecretPlugin])
	}
	if got, ok := plainDelta.secret[wasmSecretPlugin]; !ok || got != "" || len(plainDelta.raw) != 3 {
		t.Errorf("Delta in plaintext: %d resources, pull secret %q (set %v); want 3, set and empty", len(plainDelta.raw), got, ok)
	}

	// The config dump shows the ECDS resources as istiod's (EcdsConfigDump,
	// an HTTP Wasm filter as the Wasm message), the pull secret redacted.
	code, body := get(t, "http://"+s.httpAddr.String()+"/debug/config_dump?proxyID=cart-0.shop")
	var dump struct {
		Configs []struct {
			Type        string `json:"@type"`
			EcdsFilters []struct {
				EcdsFilter struct {
					Type   string `json:"@type"`
					Config struct {
						Name string `json:"name"`
						Vm   struct {
							Env struct {
								KV map[string]string `json:"key_values"`
							} `json:"environment_variables"`
						} `json:"vm_config"`
					} `json:"config"`
				} `json:"ecds_filter"`
			} `json:"ecds_filters"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(body, &dump); code != 200 || err != nil || len(dump.Configs) == 0 {
		t.Fatalf("config_dump: %d %v: %.300s", code, err, body)
	}
	last := dump.Configs[len(dump.Configs)-1]
	redacted := 0
	for _, f := range last.EcdsFilters {
		if f.EcdsFilter.Type != "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm" {
			t.Errorf("ECDS filter shown as %s, want the Wasm message", f.EcdsFilter.Type)
		}
		if v, ok := f.EcdsFilter.Config.Vm.Env.KV[wasmPullSecretEnv]; ok && v == "<Redacted>" {
			redacted++
		}
	}
	if last.Type != "type.googleapis.com/envoy.admin.v3.EcdsConfigDump" || len(last.EcdsFilters) != 3 || redacted != 2 {
		t.Errorf("config dump's last section %s with %d filters, %d pull secrets redacted; want EcdsConfigDump, 3, 2", last.Type, len(last.EcdsFilters), redacted)
	}
	if strings.Contains(string(body), "c2hvcA") {
		t.Error("the config dump shows the pull secret")
	}

	// The Secret changes: the verified stream gets the new content.
	write("wasm.yaml", wasmSecretYAML(`{"auths":{"registry.example":{"auth":"bmV3"}}}`, `{"auths":{"root":{}}}`))
	for {
		v = verified.next(t)
		if v.secret[wasmSecretPlugin] == `{"auths":{"registry.example":{"auth":"bmV3"}}}` {
			break
		}
	}
}

// deltaECDS opens a Delta stream subscribing n to names and returns its
// first ECDS response.
func deltaECDS(t *testing.T, ctx context.Context, cc *grpc.ClientConn, n *corev3.Node, names []string) ecdsGot {
	t.Helper()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: n, TypeUrl: engine.TypeExtensionConfig, ResourceNamesSubscribe: names}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	got := ecdsGot{raw: map[string][]byte{}, secret: map[string]string{}}
	for _, x := range r.Resources {
		got.add(t, x.GetResource())
	}
	return got
}

func (g ecdsGot) add(t *testing.T, a *anypb.Any) {
	t.Helper()
	var tec corev3.TypedExtensionConfig
	if err := a.UnmarshalTo(&tec); err != nil {
		t.Fatal(err)
	}
	var w httpwasm.Wasm
	if err := tec.GetTypedConfig().UnmarshalTo(&w); err != nil {
		t.Fatal(err)
	}
	g.raw[tec.Name] = a.Value
	if v, ok := w.GetConfig().GetVmConfig().GetEnvironmentVariables().GetKeyValues()[wasmPullSecretEnv]; ok {
		g.secret[tec.Name] = v
	}
}
