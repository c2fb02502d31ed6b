package loadgen

import (
	"errors"
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	// The followed resource types, registered for anypb.UnmarshalNew.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// The full decoder (Decode "full") unmarshals every message and every
// resource into go-control-plane's generated types and runs their
// protoc-gen-validate ValidateAll, counting resources that fail. It costs
// what a real client's decode costs (allocation per field) and is meant for
// checking a server's output, not for simulating 10,000 proxies. Names are
// still followed by the lazy decoder, so both modes drive proxies the same
// way.

// validateSotW fully decodes DiscoveryResponse b and validates its resources.
func validateSotW(b []byte) (invalid int, first string, err error) {
	var resp discoveryv3.DiscoveryResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		return 0, "", fmt.Errorf("%w: DiscoveryResponse: %v", ErrDecode, err)
	}
	for _, a := range resp.GetResources() {
		if msg := validateAny(a); msg != "" {
			invalid++
			if first == "" {
				first = msg
			}
		}
	}
	return invalid, first, nil
}

// validateDelta fully decodes DeltaDiscoveryResponse b and validates its
// resources.
func validateDelta(b []byte) (invalid int, first string, err error) {
	var resp discoveryv3.DeltaDiscoveryResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		return 0, "", fmt.Errorf("%w: DeltaDiscoveryResponse: %v", ErrDecode, err)
	}
	for _, r := range resp.GetResources() {
		if r.GetResource() == nil {
			continue
		}
		if msg := validateAny(r.GetResource()); msg != "" {
			invalid++
			if first == "" {
				first = r.GetName() + ": " + msg
			}
		}
	}
	return invalid, first, nil
}

// validateAny returns why resource a is invalid, or "". A type that is not
// linked into loadgen is not checked.
func validateAny(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if errors.Is(err, protoregistry.NotFound) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("%s: %v", a.GetTypeUrl(), err)
	}
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return err.Error()
		}
	}
	return ""
}
