package encode

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// NameTableType is the type URL of istio-agent's DNS name table (NDS).
const NameTableType = "type.googleapis.com/istio.networking.nds.v1.NameTable"

// NameTableGen generates NameTableKey's table, encoded directly.
var NameTableGen = resourceGenAppend(KindNameTable, NameTableType, NameTable, AppendNameTable)

// NameTableKey is every input of a proxy's DNS name table: the services its
// scope sees, and for headless services (Kubernetes, no cluster IP, NONE
// resolution) their endpoint shards, whose ready addresses the name
// resolves to.
type NameTableKey struct {
	// Services are the visible services sorted by hostname, one per host.
	Services []*index.Service
	// Headless are the endpoint shards of the headless services among
	// them, in the same order (nil entries for services without one).
	Headless []*index.EndpointShard
}

// Hash feeds every field.
func (k *NameTableKey) Hash() uint64 {
	h := NewHasher("NameTableKey")
	hashSvcRows(&h, k.Services)
	h.Int(len(k.Headless))
	for _, s := range k.Headless {
		if s == nil {
			h.U64(0)
			continue
		}
		h.U64(1)
		h.U64(s.Hash)
	}
	return h.Sum()
}

// IsHeadless reports whether istiod resolves a service's name to its
// endpoints' addresses: a Kubernetes service with no cluster IP.
func IsHeadless(s *index.Service) bool {
	return s.Origin == index.OriginKubernetes && len(s.Addresses) == 0 && s.Resolution == index.ResolutionPassthrough
}

// ntEntry is one row of the table before encoding.
type ntEntry struct {
	host, registry, shortname, namespace string
	ips                                  []string
}

// entries is istiod's BuildNameTable over the key: each visible service
// with addresses (its VIPs, or a headless service's ready endpoint IPs),
// Kubernetes names with their namespace and short name. Hosts are unique
// (the scope keeps one service per host).
func (k *NameTableKey) entries(n index.Names) []ntEntry {
	out := make([]ntEntry, 0, len(k.Services))
	for i, s := range k.Services {
		var ips []string
		for _, a := range s.Addresses {
			if a.IsSingleIP() {
				ips = append(ips, a.Addr().String())
			}
		}
		if IsHeadless(s) && i < len(k.Headless) && k.Headless[i] != nil {
			ips = append(ips, headlessIPs(k.Headless[i])...)
		}
		if len(ips) == 0 {
			continue
		}
		e := ntEntry{host: n.String(s.Key.Host), ips: ips, registry: "External"}
		if s.Origin == index.OriginKubernetes {
			e.registry = "Kubernetes"
			e.namespace = n.String(s.Key.Namespace)
			e.shortname = n.String(s.Name)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b ntEntry) int { return cmp.Compare(a.host, b.host) })
	return out
}

// headlessIPs are a headless service's healthy endpoint addresses, each
// once, in shard order.
func headlessIPs(sh *index.EndpointShard) []string {
	var out []string
	seen := map[netip.Addr]bool{}
	for gi := range sh.Groups {
		for _, e := range sh.Groups[gi].Endpoints {
			if !e.Addr.IsValid() || e.Health != index.HealthHealthy || seen[e.Addr] {
				continue
			}
			seen[e.Addr] = true
			out = append(out, e.Addr.String())
		}
	}
	return out
}

// Field numbers of nds.proto (istio.io/istio pkg/dns/proto), which
// istio.io/api does not ship: the table is encoded by hand.
const (
	ntTable         = 1 // map<string, NameInfo>
	ntMapKey        = 1
	ntMapValue      = 2
	niIPs           = 1
	niRegistry      = 2
	niShortname     = 3
	niNamespace     = 4
	ntNameTableName = "" // istiod sends the table without a resource name
)

func appendStringField(dst []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendString(dst, s)
}

func (e *ntEntry) infoSize() int {
	n := 0
	for _, ip := range e.ips {
		n += protowire.SizeTag(niIPs) + protowire.SizeBytes(len(ip))
	}
	for _, s := range [...]string{e.registry, e.shortname, e.namespace} {
		if s != "" {
			n += protowire.SizeTag(niRegistry) + protowire.SizeBytes(len(s))
		}
	}
	return n
}

func (e *ntEntry) entrySize() int {
	return protowire.SizeTag(ntMapKey) + protowire.SizeBytes(len(e.host)) +
		protowire.SizeTag(ntMapValue) + protowire.SizeBytes(e.infoSize())
}

// AppendNameTable appends k's NameTable to dst as a length-delimited value
// (its size, then its encoding, as encode.ResourceAppend expects), map
// entries in hostname order as a deterministic marshal orders them. It
// sizes the table first, so it grows dst once.
func AppendNameTable(dst []byte, n index.Names, k *NameTableKey) (string, []byte) {
	es := k.entries(n)
	size := 0
	for i := range es {
		size += protowire.SizeTag(ntTable) + protowire.SizeBytes(es[i].entrySize())
	}
	dst = slices.Grow(dst, protowire.SizeVarint(uint64(size))+size)
	dst = protowire.AppendVarint(dst, uint64(size))
	for i := range es {
		e := &es[i]
		dst = protowire.AppendTag(dst, ntTable, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(e.entrySize()))
		dst = protowire.AppendTag(dst, ntMapKey, protowire.BytesType)
		dst = protowire.AppendString(dst, e.host)
		dst = protowire.AppendTag(dst, ntMapValue, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(e.infoSize()))
		for _, ip := range e.ips {
			dst = appendStringField(dst, niIPs, ip)
		}
		dst = appendStringField(dst, niRegistry, e.registry)
		dst = appendStringField(dst, niShortname, e.shortname)
		dst = appendStringField(dst, niNamespace, e.namespace)
	}
	return ntNameTableName, dst
}

// NameTable builds the same table as a dynamic message of
// NameTableDescriptor: the reference AppendNameTable is verified against.
func NameTable(n index.Names, k *NameTableKey) (string, proto.Message) {
	md := NameTableDescriptor()
	m := dynamicpb.NewMessage(md)
	table := m.Mutable(md.Fields().ByNumber(ntTable)).Map()
	infoMD := md.Fields().ByNumber(ntTable).MapValue().Message()
	for _, e := range k.entries(n) {
		info := dynamicpb.NewMessage(infoMD)
		ips := info.Mutable(infoMD.Fields().ByNumber(niIPs)).List()
		for _, ip := range e.ips {
			ips.Append(protoreflect.ValueOfString(ip))
		}
		for num, s := range map[protowire.Number]string{niRegistry: e.registry, niShortname: e.shortname, niNamespace: e.namespace} {
			if s != "" {
				info.Set(infoMD.Fields().ByNumber(num), protoreflect.ValueOfString(s))
			}
		}
		table.Set(protoreflect.ValueOfString(e.host).MapKey(), protoreflect.ValueOfMessage(info))
	}
	return ntNameTableName, m
}

// NameTableDescriptor is istio.networking.nds.v1.NameTable, built from
// nds.proto's definition (the Go type lives in istio.io/istio, which
// pilotfish does not depend on).
func NameTableDescriptor() protoreflect.MessageDescriptor { return ntDescriptor() }

var ntDescriptor = sync.OnceValue(func() protoreflect.MessageDescriptor {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	field := func(name string, num int32, label *descriptorpb.FieldDescriptorProto_Label, typ *descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label, Type: typ, JsonName: proto.String(name)}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("pilotfish/nds.proto"),
		Package: proto.String("istio.networking.nds.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name:  proto.String("NameTable"),
			Field: []*descriptorpb.FieldDescriptorProto{field("table", 1, rep, msg, ".istio.networking.nds.v1.NameTable.TableEntry")},
			NestedType: []*descriptorpb.DescriptorProto{
				{
					Name: proto.String("NameInfo"),
					Field: []*descriptorpb.FieldDescriptorProto{
						field("ips", 1, rep, str, ""),
						field("registry", 2, opt, str, ""),
						field("shortname", 3, opt, str, ""),
						field("namespace", 4, opt, str, ""),
						field("alt_hosts", 5, rep, str, ""),
					},
				},
				{
					Name: proto.String("TableEntry"),
					Field: []*descriptorpb.FieldDescriptorProto{
						field("key", 1, opt, str, ""),
						field("value", 2, opt, msg, ".istio.networking.nds.v1.NameTable.NameInfo"),
					},
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
				},
			},
		}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		panic("encode: nds descriptor: " + err.Error())
	}
	return f.Messages().ByName("NameTable")
})
