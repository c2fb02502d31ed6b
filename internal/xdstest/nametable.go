package xdstest

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// NameTableHosts decodes an encoded Any holding an Istio NameTable (md is
// its descriptor, encode.NameTableDescriptor: the type is built at run time,
// not registered) into host → IPs.
func NameTableHosts(t testing.TB, anyBytes []byte, md protoreflect.MessageDescriptor) map[string][]string {
	t.Helper()
	var a anypb.Any
	if err := proto.Unmarshal(anyBytes, &a); err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	m.Get(md.Fields().ByName("table")).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		l := v.Message().Get(v.Message().Descriptor().Fields().ByName("ips")).List()
		for i := range l.Len() {
			out[k.String()] = append(out[k.String()], l.Get(i).String())
		}
		return true
	})
	return out
}
