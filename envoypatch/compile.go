package envoypatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
	bootstrap "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"
)

// ErrNoValueType is a patch value on an applyTo that takes none.
var ErrNoValueType = errors.New("applyTo takes no value")

// PatchError is a config patch Compile could not compile (istiod skips
// such a patch): Field is its path under the spec, e.g.
// "configPatches[2].patch.value".
type PatchError struct {
	Index int
	Field string
	Err   error
}

func (e *PatchError) Error() string { return "spec." + e.Field + ": " + e.Err.Error() }
func (e *PatchError) Unwrap() error { return e.Err }

// Compile compiles an EnvoyFilter as istiod wraps it once per push
// (convertToEnvoyFilterWrapper): each patch value typed by its applyTo
// (non-strict: fields unknown to this Envoy API are dropped), a missing
// match made {context: ANY}, proxyVersion compiled, INSERT_* on an applyTo
// without an order rewritten to ADD. The Filter is never nil: a patch that
// does not compile (no patch, a value that is no such message) is left out
// of it, as istiod leaves it out, and reported in err (*PatchError values,
// joined) so that callers that validate can name it.
func Compile(namespace, name string, ef *networking.EnvoyFilter) (*Filter, error) {
	f := &Filter{Source: namespace + "/" + name}
	var errs []error
	for i, cp := range ef.GetConfigPatches() {
		p, err := CompilePatch(f.Source, i, cp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.Patches = append(f.Patches, p)
	}
	return f, errors.Join(errs...)
}

// CompilePatch compiles one config patch (see Compile); its error is a
// *PatchError.
func CompilePatch(source string, i int, cp *networking.EnvoyFilter_EnvoyConfigObjectPatch) (*Patch, error) {
	field := fmt.Sprintf("configPatches[%d]", i)
	if cp.GetPatch() == nil {
		return nil, &PatchError{Index: i, Field: field + ".patch", Err: errors.New("required")}
	}
	p := &Patch{
		Source:      source,
		Index:       i,
		ApplyTo:     cp.GetApplyTo(),
		Operation:   cp.GetPatch().GetOperation(),
		FilterClass: cp.GetPatch().GetFilterClass(),
		Match:       cp.GetMatch(),
	}
	v, err := Value(cp.GetApplyTo(), cp.GetPatch().GetValue())
	if err != nil {
		return nil, &PatchError{Index: i, Field: field + ".patch.value", Err: err}
	}
	if v == nil && p.Operation != networking.EnvoyFilter_Patch_REMOVE && p.Operation != networking.EnvoyFilter_Patch_INVALID {
		// istiod would apply a nil value and recover from the panic.
		return nil, &PatchError{Index: i, Field: field + ".patch.value", Err: fmt.Errorf("required for operation %s", p.Operation)}
	}
	p.Value = v
	if p.Match == nil {
		p.Match = &networking.EnvoyFilter_EnvoyConfigObjectMatch{Context: networking.EnvoyFilter_ANY}
	} else if pm := p.Match.GetProxy(); pm != nil {
		p.proxy = compileProxyMatch(pm)
	}
	switch p.Operation {
	case networking.EnvoyFilter_Patch_INSERT_BEFORE, networking.EnvoyFilter_Patch_INSERT_AFTER, networking.EnvoyFilter_Patch_INSERT_FIRST:
		if !ordered(p.ApplyTo) {
			p.Operation = networking.EnvoyFilter_Patch_ADD
		}
	}
	p.Hash = patchHash(p)
	return p, nil
}

// ordered reports whether applyTo patches a list where position matters,
// the only ones istiod inserts into (the rest it adds).
func ordered(a networking.EnvoyFilter_ApplyTo) bool {
	switch a {
	case networking.EnvoyFilter_HTTP_FILTER, networking.EnvoyFilter_NETWORK_FILTER,
		networking.EnvoyFilter_HTTP_ROUTE, networking.EnvoyFilter_LISTENER_FILTER:
		return true
	}
	return false
}

// patchHash hashes what decides how a patch applies: applyTo, the
// operation, the filter class, the match and the value, each marshalled
// deterministically (Anys inside values hold deterministic bytes too: the
// JSON decoder marshals them so).
func patchHash(p *Patch) uint64 {
	d := xxhash.New()
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(p.ApplyTo))
	binary.LittleEndian.PutUint32(b[4:], uint32(p.Operation))
	binary.LittleEndian.PutUint32(b[8:], uint32(p.FilterClass))
	_, _ = d.Write(b[:])
	det := proto.MarshalOptions{Deterministic: true}
	for _, m := range []proto.Message{p.Match, p.Value} {
		var buf []byte
		if m != nil {
			buf, _ = det.Marshal(m)
		}
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(buf)))
		_, _ = d.Write(n[:])
		_, _ = d.Write(buf)
	}
	return d.Sum64()
}

// Value converts an EnvoyFilter patch value to the Envoy message its
// applyTo names (a Cluster for CLUSTER, an HttpFilter for HTTP_FILTER, ...),
// nil for none (REMOVE). Fields unknown to this Envoy API are dropped, as
// istiod does, so that a value written for a newer Envoy still applies; an
// Any whose type is not linked (types.go) is an error, as in istiod.
func Value(applyTo networking.EnvoyFilter_ApplyTo, value *structpb.Struct) (proto.Message, error) {
	if value == nil {
		return nil, nil
	}
	msg := NewValue(applyTo)
	if msg == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoValueType, applyTo)
	}
	js, err := protojson.Marshal(value)
	if err != nil {
		return nil, err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, msg); err != nil {
		s := strings.ReplaceAll(err.Error(), "\u00a0", " ") // protojson's errors use a non-breaking space
		if strings.Contains(s, "unable to resolve") {
			return nil, fmt.Errorf("not a %T: referenced type unknown: %s", msg, s)
		}
		return nil, fmt.Errorf("not a %T: %s", msg, s)
	}
	return msg, nil
}

// NewValue is an empty message of the type applyTo patches (nil for none).
func NewValue(applyTo networking.EnvoyFilter_ApplyTo) proto.Message {
	switch applyTo {
	case networking.EnvoyFilter_LISTENER:
		return &listener.Listener{}
	case networking.EnvoyFilter_FILTER_CHAIN:
		return &listener.FilterChain{}
	case networking.EnvoyFilter_NETWORK_FILTER:
		return &listener.Filter{}
	case networking.EnvoyFilter_HTTP_FILTER:
		return &hcm.HttpFilter{}
	case networking.EnvoyFilter_LISTENER_FILTER:
		return &listener.ListenerFilter{}
	case networking.EnvoyFilter_ROUTE_CONFIGURATION:
		return &route.RouteConfiguration{}
	case networking.EnvoyFilter_VIRTUAL_HOST:
		return &route.VirtualHost{}
	case networking.EnvoyFilter_HTTP_ROUTE:
		return &route.Route{}
	case networking.EnvoyFilter_CLUSTER:
		return &cluster.Cluster{}
	case networking.EnvoyFilter_EXTENSION_CONFIG:
		return &core.TypedExtensionConfig{}
	case networking.EnvoyFilter_BOOTSTRAP:
		return &bootstrap.Bootstrap{}
	}
	return nil
}
