package encode

import (
	"net/http"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonfault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	cors "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	previoushosts "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previouspriorities "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// rtAny wraps m in an Any, marshaled deterministically so that equal
// messages give equal bytes. It panics on a marshal error: the messages are
// built here and always valid protobuf.
func rtAny(m proto.Message) *anypb.Any {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic("encode: marshal " + string(m.ProtoReflect().Descriptor().FullName()) + ": " + err.Error())
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: b}
}

// istiod's retry defaults.
const (
	rtDefaultRetryOn        = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
	rtDefaultInboundRetryOn = "reset-before-request"
)

var (
	rtPreviousHosts = []*route.RetryPolicy_RetryHostPredicate{{
		Name:       "envoy.retry_host_predicates.previous_hosts",
		ConfigType: &route.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: rtAny(&previoushosts.PreviousHostsPredicate{})},
	}}
	// rtDefaultRetryPolicy is istiod's outbound default: 2 retries on
	// connection failures, avoiding the previous host. Shared read-only.
	rtDefaultRetryPolicy = &route.RetryPolicy{
		RetryOn:                       rtDefaultRetryOn,
		NumRetries:                    wrapperspb.UInt32(2),
		RetryHostPredicate:            rtPreviousHosts,
		HostSelectionRetryMaxAttempts: 5,
	}
	// rtDefaultHashRetryPolicy is the default for a consistent-hash
	// destination: retries stay on the hashed host.
	rtDefaultHashRetryPolicy = &route.RetryPolicy{
		RetryOn:                       rtDefaultRetryOn,
		NumRetries:                    wrapperspb.UInt32(2),
		HostSelectionRetryMaxAttempts: 5,
	}
	// rtDefaultInboundRetryPolicy retries requests reset before reaching
	// the application.
	rtDefaultInboundRetryPolicy = &route.RetryPolicy{
		RetryOn:    rtDefaultInboundRetryOn,
		NumRetries: wrapperspb.UInt32(2),
	}
	rtRetryRemoteLocalities = &route.RetryPolicy_RetryPriority{
		Name:       "envoy.retry_priorities.previous_priorities",
		ConfigType: &route.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: rtAny(&previouspriorities.PreviousPrioritiesConfig{UpdateFrequency: 2})},
	}
)

// rtRetryPolicy is istiod's retry.ConvertPolicy; with consistentHash set
// (a single consistent-hash destination) retries do not avoid the previous
// host.
func rtRetryPolicy(in *networking.HTTPRetry, consistentHash bool) *route.RetryPolicy {
	if in == nil {
		if consistentHash {
			return rtDefaultHashRetryPolicy
		}
		return rtDefaultRetryPolicy
	}
	if in.GetAttempts() <= 0 {
		return nil // retries explicitly disabled
	}
	out := &route.RetryPolicy{
		RetryOn:                       rtDefaultRetryOn,
		NumRetries:                    wrapperspb.UInt32(uint32(in.GetAttempts())),
		HostSelectionRetryMaxAttempts: 5,
	}
	if !consistentHash {
		out.RetryHostPredicate = rtPreviousHosts
	}
	if in.GetRetryOn() != "" {
		out.RetryOn, out.RetriableStatusCodes = rtParseRetryOn(in.GetRetryOn())
		if len(out.RetriableStatusCodes) > 0 && !strings.Contains(out.RetryOn, "retriable-status-codes") {
			out.RetryOn += ",retriable-status-codes"
		}
	}
	if in.GetPerTryTimeout() != nil {
		out.PerTryTimeout = in.GetPerTryTimeout()
	}
	if in.GetRetryIgnorePreviousHosts() != nil {
		out.RetryHostPredicate = nil
		if in.GetRetryIgnorePreviousHosts().GetValue() {
			out.RetryHostPredicate = rtPreviousHosts
		}
	}
	if in.GetRetryRemoteLocalities().GetValue() {
		out.RetryPriority = rtRetryRemoteLocalities
	}
	if in.GetBackoff() != nil {
		out.RetryBackOff = &route.RetryPolicy_RetryBackOff{BaseInterval: in.GetBackoff()}
	}
	return out
}

// rtParseRetryOn splits retryOn into Envoy conditions and HTTP status codes.
func rtParseRetryOn(s string) (string, []uint32) {
	var conds []string
	var codes []uint32
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if i, err := strconv.Atoi(part); err == nil && http.StatusText(i) != "" {
			codes = append(codes, uint32(i))
			continue
		}
		conds = append(conds, part)
	}
	return strings.Join(conds, ","), codes
}

// rtPercent is istiod's translatePercentToFractionalPercent.
func rtPercent(p *networking.Percent) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: uint32(p.GetValue() * 10000), Denominator: typev3.FractionalPercent_MILLION}
}

func rtIntPercent(p int32) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: uint32(p), Denominator: typev3.FractionalPercent_HUNDRED}
}

// rtTranslateFault is istiod's TranslateFault: fixed delays and HTTP or
// gRPC aborts; nil when nothing applies.
func rtTranslateFault(in *networking.HTTPFaultInjection) *fault.HTTPFault {
	out := &fault.HTTPFault{}
	if d := in.GetDelay(); d != nil {
		out.Delay = &commonfault.FaultDelay{}
		if d.GetPercentage() != nil {
			out.Delay.Percentage = rtPercent(d.GetPercentage())
		} else {
			out.Delay.Percentage = rtIntPercent(d.GetPercent()) //nolint:staticcheck // istiod honours the deprecated field
		}
		if fd := d.GetFixedDelay(); fd != nil {
			out.Delay.FaultDelaySecifier = &commonfault.FaultDelay_FixedDelay{FixedDelay: fd}
		} else {
			out.Delay = nil // exponential delays are not supported
		}
	}
	if a := in.GetAbort(); a != nil {
		out.Abort = &fault.FaultAbort{}
		if a.GetPercentage() != nil {
			out.Abort.Percentage = rtPercent(a.GetPercentage())
		}
		switch e := a.GetErrorType().(type) {
		case *networking.HTTPFaultInjection_Abort_HttpStatus:
			out.Abort.ErrorType = &fault.FaultAbort_HttpStatus{HttpStatus: uint32(e.HttpStatus)}
		case *networking.HTTPFaultInjection_Abort_GrpcStatus:
			code, ok := grpcStatusCodes[e.GrpcStatus]
			if !ok {
				out.Abort = nil
				break
			}
			out.Abort.ErrorType = &fault.FaultAbort_GrpcStatus{GrpcStatus: code}
		default:
			out.Abort = nil
		}
	}
	if out.Delay == nil && out.Abort == nil {
		return nil
	}
	return out
}

// grpcStatusCodes maps the status names VirtualService aborts use to codes.
var grpcStatusCodes = map[string]uint32{
	"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
	"NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
	"FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12,
	"INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}

// rtTranslateCORS is istiod's TranslateCORSPolicy.
func rtTranslateCORS(in *networking.CorsPolicy) *cors.CorsPolicy {
	out := &cors.CorsPolicy{
		ForwardNotMatchingPreflights: wrapperspb.Bool(in.GetUnmatchedPreflights() != networking.CorsPolicy_IGNORE),
		FilterEnabled: &core.RuntimeFractionalPercent{
			DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
		},
		AllowCredentials: in.GetAllowCredentials(),
		AllowHeaders:     strings.Join(in.GetAllowHeaders(), ","),
		AllowMethods:     strings.Join(in.GetAllowMethods(), ","),
		ExposeHeaders:    strings.Join(in.GetExposeHeaders(), ","),
	}
	switch {
	case in.GetAllowOrigins() != nil:
		for _, o := range in.GetAllowOrigins() {
			if m := rtStringMatcher(o); m != nil {
				out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, m)
			}
		}
	case in.GetAllowOrigin() != nil: //nolint:staticcheck // istiod honours the deprecated field
		for _, o := range in.GetAllowOrigin() { //nolint:staticcheck
			out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, rtStringMatcher(&networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: o}}))
		}
	}
	if in.GetMaxAge() != nil {
		out.MaxAge = strconv.FormatInt(in.GetMaxAge().GetSeconds(), 10)
	}
	return out
}

// rtMirrorPercent is istiod's MirrorPercent: mirrorPercentage, the
// deprecated mirrorPercent, else 100%; an explicit 0 disables mirroring.
func rtMirrorPercent(in *networking.HTTPRoute) *core.RuntimeFractionalPercent {
	switch {
	case in.GetMirrorPercentage() != nil:
		if in.GetMirrorPercentage().GetValue() > 0 {
			return &core.RuntimeFractionalPercent{DefaultValue: rtPercent(in.GetMirrorPercentage())}
		}
		return nil
	case in.GetMirrorPercent() != nil: //nolint:staticcheck // istiod honours the deprecated field
		if v := in.GetMirrorPercent().GetValue(); v > 0 { //nolint:staticcheck
			return &core.RuntimeFractionalPercent{DefaultValue: rtIntPercent(int32(v))}
		}
		return nil
	}
	return &core.RuntimeFractionalPercent{DefaultValue: rtIntPercent(100)}
}

func rtMirrorPercentByPolicy(m *networking.HTTPMirrorPolicy) *core.RuntimeFractionalPercent {
	if m.GetPercentage() != nil {
		if m.GetPercentage().GetValue() > 0 {
			return &core.RuntimeFractionalPercent{DefaultValue: rtPercent(m.GetPercentage())}
		}
		return nil
	}
	return &core.RuntimeFractionalPercent{DefaultValue: rtIntPercent(100)}
}

func rtMirrorPolicy(cluster string, mp *core.RuntimeFractionalPercent) *route.RouteAction_RequestMirrorPolicy {
	return &route.RouteAction_RequestMirrorPolicy{
		Cluster:         cluster,
		RuntimeFraction: mp,
		TraceSampled:    wrapperspb.Bool(false),
	}
}

// rtApplyRedirect is istiod's ApplyRedirect for a plaintext listener.
func rtApplyRedirect(out *route.Route, in *networking.HTTPRedirect, port uint32) {
	r := &route.RedirectAction{HostRedirect: in.GetAuthority()}
	if in.GetPrefixRewrite() != "" {
		r.PathRewriteSpecifier = &route.RedirectAction_PrefixRewrite{PrefixRewrite: in.GetPrefixRewrite()}
	} else {
		r.PathRewriteSpecifier = &route.RedirectAction_PathRedirect{PathRedirect: in.GetUri()}
	}
	if in.GetScheme() != "" {
		r.SchemeRewriteSpecifier = &route.RedirectAction_SchemeRedirect{SchemeRedirect: in.GetScheme()}
	}
	if in.GetRedirectPort() != nil {
		switch rp := in.GetRedirectPort().(type) {
		case *networking.HTTPRedirect_DerivePort:
			if rp.DerivePort == networking.HTTPRedirect_FROM_REQUEST_PORT {
				r.PortRedirect = port
			}
		case *networking.HTTPRedirect_Port:
			r.PortRedirect = rp.Port
		}
		scheme := in.GetScheme()
		if scheme == "" {
			scheme = "http"
		}
		if (r.PortRedirect == 80 && scheme == "http") || (r.PortRedirect == 443 && scheme == "https") {
			r.PortRedirect = 0
		}
	}
	switch in.GetRedirectCode() {
	case 0, 301:
		r.ResponseCode = route.RedirectAction_MOVED_PERMANENTLY
	case 302:
		r.ResponseCode = route.RedirectAction_FOUND
	case 303:
		r.ResponseCode = route.RedirectAction_SEE_OTHER
	case 307:
		r.ResponseCode = route.RedirectAction_TEMPORARY_REDIRECT
	case 308:
		r.ResponseCode = route.RedirectAction_PERMANENT_REDIRECT
	default:
		out.Action = nil // unsupported code: istiod leaves the route without an action
		return
	}
	out.Action = &route.Route_Redirect{Redirect: r}
}

// rtApplyDirectResponse is istiod's ApplyDirectResponse.
func rtApplyDirectResponse(out *route.Route, in *networking.HTTPDirectResponse) {
	dr := &route.DirectResponseAction{Status: in.GetStatus()}
	switch b := in.GetBody().GetSpecifier().(type) {
	case *networking.HTTPBody_String_:
		dr.Body = &core.DataSource{Specifier: &core.DataSource_InlineString{InlineString: b.String_}}
	case *networking.HTTPBody_Bytes:
		dr.Body = &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: b.Bytes}}
	}
	out.Action = &route.Route_DirectResponse{DirectResponse: dr}
}
