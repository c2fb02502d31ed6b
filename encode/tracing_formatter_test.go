package encode

import (
	"testing"

	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuid "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
)

// TestTracingTelemetryFields: a formatter tag is Envoy's value tag;
// NoRequestIDSampling turns the UUID extension's trace sampling off and
// NoContextPropagation sets no_context_propagation; without them the
// HCM keeps istiod's default extension.
func TestTracingTelemetryFields(t *testing.T) {
	h := &hcm.HttpConnectionManager{RequestIdExtension: hfUUIDRequestID}
	(&Tracing{On: true, Sampling: 5, Tags: []TraceTag{{Tag: "f", Kind: TraceTagFormatter, Value: "%REQ(:PATH)%"}},
		NoRequestIDSampling: true, NoContextPropagation: true}).apply(h)
	tags := h.GetTracing().GetCustomTags()
	if len(tags) != 1 || tags[0].GetValue() != "%REQ(:PATH)%" {
		t.Errorf("custom tags %v", tags)
	}
	if !h.GetTracing().GetNoContextPropagation() {
		t.Error("no_context_propagation not set")
	}
	var cfg uuid.UuidRequestIdConfig
	if err := h.GetRequestIdExtension().GetTypedConfig().UnmarshalTo(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.GetUseRequestIdForTraceSampling() == nil || cfg.GetUseRequestIdForTraceSampling().GetValue() {
		t.Errorf("use_request_id_for_trace_sampling %v, want false", cfg.GetUseRequestIdForTraceSampling())
	}
	h2 := &hcm.HttpConnectionManager{RequestIdExtension: hfUUIDRequestID}
	(&Tracing{On: true}).apply(h2)
	if h2.RequestIdExtension != hfUUIDRequestID || h2.GetTracing().GetNoContextPropagation() {
		t.Error("a Tracing without the Telemetry fields changed the request ID extension or context propagation")
	}
}
