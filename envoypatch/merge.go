package envoypatch

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
)

// ErrAnyMerge is a MERGE of two typed configs istiod cannot merge: of
// different types, or of a type this build does not link.
var ErrAnyMerge = errors.New("cannot merge typed configs")

// durationName is the one message istiod's merge replaces instead of
// merging field by field (so that 2s merged onto 1.5s is 2s, not 2.5s).
var durationName = (&durationpb.Duration{}).ProtoReflect().Descriptor().FullName()

func isMerge(op networking.EnvoyFilter_Patch_Operation) bool {
	return op == networking.EnvoyFilter_Patch_MERGE || op == networking.EnvoyFilter_Patch_MERGE_AND_REPLACE_LIST
}

// mergeValue merges a patch value into a generated message with istiod's
// semantics for the operation: proto merge (set scalars and oneofs
// replace, messages merge, lists append, map entries replace) except that
// durations replace whole; MERGE_AND_REPLACE_LIST replaces every list the
// value sets, at any depth. Nothing of src is aliased into dst: the patch
// values are shared.
func mergeValue(op networking.EnvoyFilter_Patch_Operation, dst, src proto.Message) {
	mergeMessage(dst.ProtoReflect(), src.ProtoReflect(), op == networking.EnvoyFilter_Patch_MERGE_AND_REPLACE_LIST)
}

func mergeMessage(dst, src protoreflect.Message, replaceLists bool) {
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := dst.Mutable(fd).List()
			if replaceLists {
				l.Truncate(0)
			}
			sl := v.List()
			for i := 0; i < sl.Len(); i++ {
				l.Append(copyValue(fd, l.NewElement, sl.Get(i), replaceLists))
			}
		case fd.IsMap():
			m := dst.Mutable(fd).Map()
			vd := fd.MapValue()
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				m.Set(k, copyValue(vd, m.NewValue, mv, replaceLists))
				return true
			})
		case fd.Message() != nil && fd.Message().FullName() == durationName:
			dst.Set(fd, protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect()))
		case fd.Message() != nil:
			mergeMessage(dst.Mutable(fd).Message(), v.Message(), replaceLists)
		case fd.Kind() == protoreflect.BytesKind:
			dst.Set(fd, protoreflect.ValueOfBytes(append([]byte{}, v.Bytes()...)))
		default:
			dst.Set(fd, v)
		}
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(append(append(protoreflect.RawFields{}, dst.GetUnknown()...), u...))
	}
}

// copyValue is a list element or map value of fd copied from v: messages
// into a fresh one from newMsg, bytes copied, scalars as they are.
func copyValue(fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, v protoreflect.Value, replaceLists bool) protoreflect.Value {
	switch {
	case fd.Message() != nil:
		n := newMsg()
		mergeMessage(n.Message(), v.Message(), replaceLists)
		return n
	case fd.Kind() == protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(append([]byte{}, v.Bytes()...))
	}
	return v
}

// mergeAny merges the typed config src into dst as istiod merges filter
// and transport socket configs: both decoded, merged (MERGE semantics),
// encoded again. dst is not changed; the result is fresh.
func mergeAny(dst, src *anypb.Any) (*anypb.Any, error) {
	d, err := dst.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAnyMerge, err)
	}
	s, err := src.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAnyMerge, err)
	}
	dn, sn := d.ProtoReflect().Descriptor().FullName(), s.ProtoReflect().Descriptor().FullName()
	if dn != sn {
		return nil, fmt.Errorf("%w: %s onto %s", ErrAnyMerge, sn, dn)
	}
	mergeMessage(d.ProtoReflect(), s.ProtoReflect(), false)
	return toAny(d)
}

// toAny encodes m deterministically (equal configs, equal bytes).
func toAny(m proto.Message) (*anypb.Any, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: b}, nil
}
