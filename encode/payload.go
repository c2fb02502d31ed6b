package encode

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// marshalBare encodes a message without an Any wrapper.
func marshalBare(m proto.Message) ([]byte, error) { return appendMessage(nil, m) }

// anyPayload decodes an Any-encoded resource into a fresh message of the
// type ref produces (verify mode only).
func anyPayload(b []byte, ref func() (string, proto.Message)) proto.Message {
	_, proto0 := ref()
	msg := proto0.ProtoReflect().New().Interface()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == anyValue && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || proto.Unmarshal(v, msg) != nil {
				return nil
			}
			return msg
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil
		}
		b = b[n:]
	}
	return msg
}

// barePayload decodes a bare message (verify mode only).
func barePayload(b []byte, ref func() (string, proto.Message)) proto.Message {
	_, proto0 := ref()
	msg := proto0.ProtoReflect().New().Interface()
	if proto.Unmarshal(b, msg) != nil {
		return nil
	}
	return msg
}
