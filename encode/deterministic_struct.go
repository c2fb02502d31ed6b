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

func sizeMetadata(md *corev3.Metadata) int {
	n := 0
	for k, s := range md.FilterMetadata {
		n += sizeBytesField(sizeBytesField(len(k)) + sizeBytesField(sizeStruct(s)))
	}
	for k, a := range md.TypedFilterMetadata {
		n += sizeBytesField(sizeBytesField(len(k)) + sizeBytesField(sizeAny(a.GetTypeUrl(), a.GetValue())))
	}
	return n
}

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
		s := md.FilterMetadata[k]
		ss := sizeStruct(s)
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeBytesField(len(k))+sizeBytesField(ss)))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(ss))
		dst = appendStruct(dst, s)
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

// Struct{fields: 1 map<string, Value>}
func sizeStruct(s *structpb.Struct) int {
	n := 0
	for k, v := range s.GetFields() {
		n += sizeBytesField(sizeBytesField(len(k)) + sizeBytesField(sizeValue(v)))
	}
	return n
}

func appendStruct(dst []byte, s *structpb.Struct) []byte {
	var scratch [8]string
	for _, k := range keysInOrder(s.GetFields(), &scratch) {
		v := s.Fields[k]
		vs := sizeValue(v)
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeBytesField(len(k))+sizeBytesField(vs)))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(vs))
		dst = appendValue(dst, v)
	}
	return dst
}

// Value{null_value: 1, number_value: 2, string_value: 3, bool_value: 4,
// struct_value: 5, list_value: 6}; ListValue{values: 1}.
func sizeValue(v *structpb.Value) int {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return 1 + protowire.SizeVarint(uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		return 1 + 8
	case *structpb.Value_StringValue:
		return sizeBytesField(len(k.StringValue))
	case *structpb.Value_BoolValue:
		return 2
	case *structpb.Value_StructValue:
		return sizeBytesField(sizeStruct(k.StructValue))
	case *structpb.Value_ListValue:
		return sizeBytesField(sizeList(k.ListValue))
	}
	return 0
}

func sizeList(l *structpb.ListValue) int {
	n := 0
	for _, v := range l.GetValues() {
		n += sizeBytesField(sizeValue(v))
	}
	return n
}

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
		dst = protowire.AppendVarint(dst, uint64(sizeStruct(k.StructValue)))
		return appendStruct(dst, k.StructValue)
	case *structpb.Value_ListValue:
		dst = protowire.AppendTag(dst, 6, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeList(k.ListValue)))
		for _, e := range k.ListValue.GetValues() {
			dst = protowire.AppendTag(dst, 1, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(sizeValue(e)))
			dst = appendValue(dst, e)
		}
		return dst
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
