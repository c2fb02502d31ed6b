package rules

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// nameTableHosts decodes a NameTable resource into host → IPs.
func nameTableHosts(t *testing.T, r Resource) map[string][]string {
	t.Helper()
	md := encode.NameTableDescriptor()
	m := dynamicpb.NewMessage(md)
	var value []byte
	for _, c := range decodeAnyFields(t, r.Any) {
		if c.num == 2 {
			value = c.val
		}
	}
	if err := proto.Unmarshal(value, m); err != nil {
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

type anyField struct {
	num int
	val []byte
}

func decodeAnyFields(t *testing.T, b []byte) []anyField {
	t.Helper()
	var out []anyField
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			t.Fatal("bad Any encoding")
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			t.Fatal("bad Any encoding")
		}
		out = append(out, anyField{int(num), v})
		b = b[n+m:]
	}
	return out
}
