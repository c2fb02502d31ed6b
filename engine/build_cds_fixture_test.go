package engine

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

type xdsValidator interface{ ValidateAll() error }

// decodeResources unpacks each resource's Any into a fresh M, checks the
// names agree and runs go-control-plane's ValidateAll on it and on every
// Any nested in it.
func decodeResources[M proto.Message](t testing.TB, rs []Resource, newM func() M) []M {
	t.Helper()
	out := make([]M, 0, len(rs))
	for _, r := range rs {
		var a anypb.Any
		if err := proto.Unmarshal(r.Any, &a); err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		m := newM()
		if err := a.UnmarshalTo(m); err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if err := validateDeep(m.ProtoReflect()); err != nil {
			t.Fatalf("%s: invalid: %v", r.Name, err)
		}
		out = append(out, m)
	}
	return out
}

func validateDeep(m protoreflect.Message) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return err
		}
		return validateDeep(inner.ProtoReflect())
	}
	if v, ok := m.Interface().(xdsValidator); ok {
		if err := v.ValidateAll(); err != nil {
			return err
		}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = validateDeep(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = validateDeep(mv.Message())
				return err == nil
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			err = validateDeep(v.Message())
		}
		return err == nil
	})
	return err
}
