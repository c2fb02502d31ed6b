package encode

import (
	"math"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"
)

// A deterministic encoder for Metadata (filter_metadata Structs and
// typed_filter_metadata Anys) with map keys sorted: proto's deterministic
// marshaling does the same through reflection at several times the cost,
// which doubled the cold cost of a cluster.

func sizeAny(typeURL string, value []byte) int {
	n := 0
	if typeURL != "" {
		n += sizeBytesField(len(typeURL))
	}
	if len(value) > 0 {
		n += sizeBytesField(len(value))
	}
	return n
}

func appendMetadata(dst []byte, md *corev3.Metadata) []byte {
	var scratch [8]string
	for _, k := range keysInOrder(md.FilterMetadata, &scratch) {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		entry := openLen(&dst)
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		value := openLen(&dst)
		dst = appendStruct(dst, md.FilterMetadata[k])
		dst = closeLen(dst, value)
		dst = closeLen(dst, entry)
	}
	for _, k := range keysInOrder(md.TypedFilterMetadata, &scratch) {
		a := md.TypedFilterMetadata[k]
		as := sizeAny(a.GetTypeUrl(), a.GetValue())
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeBytesField(len(k))+sizeBytesField(as)))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(as))
		if a.GetTypeUrl() != "" {
			dst = protowire.AppendTag(dst, 1, protowire.BytesType)
			dst = protowire.AppendString(dst, a.GetTypeUrl())
		}
		if len(a.GetValue()) > 0 {
			dst = protowire.AppendTag(dst, 2, protowire.BytesType)
			dst = protowire.AppendBytes(dst, a.GetValue())
		}
	}
	return dst
}

// openLen starts a length-delimited value whose length is not known yet:
// it reserves one byte for the length and returns where it is. closeLen
// writes the length once the value is appended, moving the value up in the
// rare case it is 128 bytes or more. Each level of a nested Struct is thus
// written once, not sized again by every level above it.
func openLen(dst *[]byte) int {
	*dst = append(*dst, 0)
	return len(*dst) - 1
}

func closeLen(dst []byte, at int) []byte {
	n := len(dst) - at - 1
	if n < 0x80 {
		dst[at] = byte(n)
		return dst
	}
	w := protowire.SizeVarint(uint64(n))
	dst = append(dst, make([]byte, w-1)...)
	copy(dst[at+w:], dst[at+1:at+1+n])
	protowire.AppendVarint(dst[at:at], uint64(n))
	return dst
}

// Struct{fields: 1 map<string, Value>}
func appendStruct(dst []byte, s *structpb.Struct) []byte {
	var scratch [8]string
	for _, k := range keysInOrder(s.GetFields(), &scratch) {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		entry := openLen(&dst)
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		value := openLen(&dst)
		dst = appendValue(dst, s.Fields[k])
		dst = closeLen(dst, value)
		dst = closeLen(dst, entry)
	}
	return dst
}

// Value{null_value: 1, number_value: 2, string_value: 3, bool_value: 4,
// struct_value: 5, list_value: 6}; ListValue{values: 1}.
func appendValue(dst []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		return protowire.AppendVarint(dst, uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		dst = protowire.AppendTag(dst, 2, protowire.Fixed64Type)
		return protowire.AppendFixed64(dst, math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		return protowire.AppendString(dst, k.StringValue)
	case *structpb.Value_BoolValue:
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		return protowire.AppendVarint(dst, protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		dst = protowire.AppendTag(dst, 5, protowire.BytesType)
		at := openLen(&dst)
		dst = appendStruct(dst, k.StructValue)
		return closeLen(dst, at)
	case *structpb.Value_ListValue:
		dst = protowire.AppendTag(dst, 6, protowire.BytesType)
		list := openLen(&dst)
		for _, e := range k.ListValue.GetValues() {
			dst = protowire.AppendTag(dst, 1, protowire.BytesType)
			at := openLen(&dst)
			dst = appendValue(dst, e)
			dst = closeLen(dst, at)
		}
		return closeLen(dst, list)
	}
	return dst
}

// keysInOrder returns m's keys sorted, in scratch when they fit.
func keysInOrder[V any](m map[string]V, scratch *[8]string) []string {
	keys := scratch[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
