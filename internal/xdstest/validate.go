package xdstest

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

type validator interface{ ValidateAll() error }

// Validate runs ValidateAll on m and on every message inside it, opening
// each Any on the way.
func Validate(m proto.Message) error { return validateDeep(m.ProtoReflect()) }

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

// Decode unpacks the encoded Any of the resource called name into a fresh
// M and validates it, failing t on any error.
func Decode[M proto.Message](t testing.TB, name string, anyBytes []byte, newM func() M) M {
	t.Helper()
	var a anypb.Any
	if err := proto.Unmarshal(anyBytes, &a); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m := newM()
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := Validate(m); err != nil {
		t.Fatalf("%s: invalid: %v", name, err)
	}
	return m
}
