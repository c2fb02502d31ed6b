package encode_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

type validator interface{ ValidateAll() error }

// mustValidate runs go-control-plane's generated validation (ValidateAll)
// on m and on every message packed in an Any inside it (typed configs,
// transport sockets, protocol options), which ValidateAll itself does not
// open. Every test of a generator calls it on what it produced.
func mustValidate(t testing.TB, m proto.Message) {
	t.Helper()
	if err := validateDeep(m.ProtoReflect()); err != nil {
		t.Fatalf("invalid %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
}

func validateDeep(m protoreflect.Message) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return err
		}
		return validateDeep(inner.ProtoReflect())
	}
	if v, ok := m.Interface().(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return err
		}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = validateDeep(l.Get(i).Message())
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
