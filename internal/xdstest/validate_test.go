package xdstest

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestValidateOpensNestedAnys: an invalid message packed in a transport
// socket's Any fails validation, as ValidateAll alone would miss.
func TestValidateOpensNestedAnys(t *testing.T) {
	bad, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: strings.Repeat("x", 300)}) // sni: max 255 bytes
	if err != nil {
		t.Fatal(err)
	}
	c := &clusterv3.Cluster{Name: "c", TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: bad}}}
	if err := c.ValidateAll(); err != nil {
		t.Fatalf("ValidateAll alone: %v (the test needs it to miss the nested error)", err)
	}
	if err := Validate(c); err == nil || !strings.Contains(err.Error(), "Sni") {
		t.Errorf("Validate = %v, want the nested Sni error", err)
	}
	good, _ := anypb.New(&tlsv3.UpstreamTlsContext{Sni: "ok"})
	c.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: good}
	if err := Validate(c); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
}
