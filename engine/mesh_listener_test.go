package engine

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// listenerMeshDefaults are istiod's defaults of the fields
// applyListenerMesh reads (pkg/config/mesh DefaultMeshConfig).
func listenerMeshDefaults() *meshv1alpha1.MeshConfig {
	return &meshv1alpha1.MeshConfig{
		RootNamespace:            "istio-system",
		ProxyListenPort:          15001,
		ProxyInboundListenPort:   15006,
		ProtocolDetectionTimeout: durationpb.New(0),
	}
}

// parseListenerMesh reads MeshConfig YAML over istiod's defaults.
func parseListenerMesh(t *testing.T, y string) *meshv1alpha1.MeshConfig {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	in := &meshv1alpha1.MeshConfig{}
	if err := protojson.Unmarshal(j, in); err != nil {
		t.Fatal(err)
	}
	cfg := listenerMeshDefaults()
	proto.Merge(cfg, in)
	return cfg
}

// TestApplyListenerMeshDefaults: istiod's defaults leave the mesh as
// encode.DefaultMesh has it.
func TestApplyListenerMeshDefaults(t *testing.T) {
	m := encode.DefaultMesh()
	if err := applyListenerMesh(m, listenerMeshDefaults()); err != nil {
		t.Fatal(err)
	}
	want := encode.DefaultMesh()
	if !reflect.DeepEqual(m.Clone(), want.Clone()) {
		t.Errorf("mesh from istiod's defaults\n got %+v\nwant %+v", m.Clone(), want.Clone())
	}
}

// TestApplyListenerMeshCase: the mesh.yaml of the istiodref case
// mesh-listener (what rules' comparisons with istiod assume) and of
// mesh-exportto.
func TestApplyListenerMeshCase(t *testing.T) {
	read := func(name string) *meshv1alpha1.MeshConfig {
		b, err := os.ReadFile(filepath.Join("..", "internal", "istiodref", "testdata", name, "mesh.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return parseListenerMesh(t, string(b))
	}
	m := encode.DefaultMesh()
	if err := applyListenerMesh(m, read("mesh-listener")); err != nil {
		t.Fatal(err)
	}
	wantRetry := encode.HTTPRetry{Set: true, Attempts: 4, RetryOn: "gateway-error,503", PerTryTimeout: 2 * time.Second, HasPerTryTimeout: true,
		RetryRemoteLocalities: true, HasIgnorePreviousHosts: true, Backoff: 25 * time.Millisecond, HasBackoff: true}
	if m.RootNamespace != "mesh-root" || m.PathNormalization != encode.PathNormalizeMergeSlashes || m.DefaultRetry != wantRetry ||
		m.InboundTrafficPolicy != encode.InboundLocalhost || m.ProtocolDetectionTimeout != 5*time.Second {
		t.Errorf("mesh-listener: got %+v", m)
	}
	m = encode.DefaultMesh()
	if err := applyListenerMesh(m, read("mesh-exportto")); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.DefaultServiceExportTo, []string{"."}) || !reflect.DeepEqual(m.DefaultVirtualServiceExportTo, []string{"."}) ||
		!reflect.DeepEqual(m.DefaultDestinationRuleExportTo, []string{".", "exb"}) {
		t.Errorf("mesh-exportto: got %q %q %q", m.DefaultServiceExportTo, m.DefaultVirtualServiceExportTo, m.DefaultDestinationRuleExportTo)
	}
}

// TestApplyListenerMeshValues: each value maps to its setting.
func TestApplyListenerMeshValues(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want func(m *encode.Mesh) bool
	}{
		{"pathNormalization: {normalization: NONE}", func(m *encode.Mesh) bool { return m.PathNormalization == encode.PathNormalizeNone }},
		{"pathNormalization: {normalization: BASE}", func(m *encode.Mesh) bool { return m.PathNormalization == encode.PathNormalizeBase }},
		{"pathNormalization: {normalization: DECODE_AND_MERGE_SLASHES}", func(m *encode.Mesh) bool {
			return m.PathNormalization == encode.PathNormalizeDecodeAndMergeSlashes
		}},
		{"defaultHttpRetryPolicy: {attempts: 0}", func(m *encode.Mesh) bool { return m.DefaultRetry == encode.HTTPRetry{Set: true} }},
		{"defaultHttpRetryPolicy: {attempts: 3, retryIgnorePreviousHosts: false, retryRemoteLocalities: true, backoff: 0.025s}", func(m *encode.Mesh) bool {
			return m.DefaultRetry == encode.HTTPRetry{Set: true, Attempts: 3, HasIgnorePreviousHosts: true, RetryRemoteLocalities: true,
				Backoff: 25 * time.Millisecond, HasBackoff: true}
		}},
		{"inboundTrafficPolicy: {mode: PASSTHROUGH}", func(m *encode.Mesh) bool { return m.InboundTrafficPolicy == encode.InboundPassthrough }},
		{"defaultServiceExportTo: []", func(m *encode.Mesh) bool {
			return m.DefaultServiceExportTo == nil // protojson: an empty list is absent
		}},
		{"defaultVirtualServiceExportTo: ['~']", func(m *encode.Mesh) bool { return reflect.DeepEqual(m.DefaultVirtualServiceExportTo, []string{"~"}) }},
		{"protocolDetectionTimeout: 0.1s", func(m *encode.Mesh) bool { return m.ProtocolDetectionTimeout == 100*time.Millisecond }},
		// Ambient only: nothing pilotfish generates changes.
		{"serviceEntryVisibility: {defaultVisibility: NAMESPACE}", func(m *encode.Mesh) bool { return reflect.DeepEqual(m.Clone(), encode.DefaultMesh().Clone()) }},
	} {
		t.Run(tc.yaml, func(t *testing.T) {
			m := encode.DefaultMesh()
			if err := applyListenerMesh(m, parseListenerMesh(t, tc.yaml)); err != nil {
				t.Fatal(err)
			}
			if !tc.want(m) {
				t.Errorf("got %+v", m)
			}
		})
	}
}

// TestApplyListenerMeshRefuses: a value pilotfish cannot honour fails,
// naming the field.
func TestApplyListenerMeshRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(c *meshv1alpha1.MeshConfig)
		field string
	}{
		{"root namespace", func(c *meshv1alpha1.MeshConfig) { c.RootNamespace = "Mesh_Root" }, "rootNamespace"},
		{"empty root namespace", func(c *meshv1alpha1.MeshConfig) { c.RootNamespace = "" }, "rootNamespace"},
		{"service exportTo", func(c *meshv1alpha1.MeshConfig) { c.DefaultServiceExportTo = []string{".", "a/b"} }, "defaultServiceExportTo[1]"},
		{"vs exportTo", func(c *meshv1alpha1.MeshConfig) { c.DefaultVirtualServiceExportTo = []string{""} }, "defaultVirtualServiceExportTo[0]"},
		{"dr exportTo", func(c *meshv1alpha1.MeshConfig) { c.DefaultDestinationRuleExportTo = []string{"**"} }, "defaultDestinationRuleExportTo[0]"},
		{"path normalization", func(c *meshv1alpha1.MeshConfig) {
			c.PathNormalization = &meshv1alpha1.MeshConfig_ProxyPathNormalization{Normalization: 9}
		}, "pathNormalization.normalization"},
		{"inbound mode", func(c *meshv1alpha1.MeshConfig) {
			c.InboundTrafficPolicy = &meshv1alpha1.MeshConfig_InboundTrafficPolicy{Mode: 7}
		}, "inboundTrafficPolicy.mode"},
		{"detection sub-ms", func(c *meshv1alpha1.MeshConfig) { c.ProtocolDetectionTimeout = durationpb.New(1500 * time.Microsecond) }, "protocolDetectionTimeout"},
		{"detection negative", func(c *meshv1alpha1.MeshConfig) { c.ProtocolDetectionTimeout = durationpb.New(-time.Second) }, "protocolDetectionTimeout"},
		{"retry attempts", func(c *meshv1alpha1.MeshConfig) { c.DefaultHttpRetryPolicy = &networking.HTTPRetry{Attempts: -1} }, "defaultHttpRetryPolicy.attempts"},
		{"retry per try", func(c *meshv1alpha1.MeshConfig) {
			c.DefaultHttpRetryPolicy = &networking.HTTPRetry{Attempts: 1, PerTryTimeout: durationpb.New(0)}
		}, "defaultHttpRetryPolicy.perTryTimeout"},
		{"retry backoff", func(c *meshv1alpha1.MeshConfig) {
			c.DefaultHttpRetryPolicy = &networking.HTTPRetry{Attempts: 1, Backoff: durationpb.New(time.Microsecond)}
		}, "defaultHttpRetryPolicy.backoff"},
		{"listen port", func(c *meshv1alpha1.MeshConfig) { c.ProxyListenPort = 15002 }, "proxyListenPort"},
		{"inbound listen port", func(c *meshv1alpha1.MeshConfig) { c.ProxyInboundListenPort = 15007 }, "proxyInboundListenPort"},
		{"http proxy port", func(c *meshv1alpha1.MeshConfig) { c.ProxyHttpPort = 8080 }, "proxyHttpPort"},
		{"service entry visibility", func(c *meshv1alpha1.MeshConfig) {
			c.ServiceEntryVisibility = &meshv1alpha1.ServiceEntryVisibility{ApplyToSidecars: true}
		}, "serviceEntryVisibility.applyToSidecars"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := listenerMeshDefaults()
			tc.edit(cfg)
			err := applyListenerMesh(encode.DefaultMesh(), cfg)
			if !errors.Is(err, ErrBadMeshSetting) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("got %v, want %v naming %s", err, ErrBadMeshSetting, tc.field)
			}
		})
	}
}
