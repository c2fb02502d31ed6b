package encode

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// epWriter sizes and writes the LbEndpoints of one assignment.
type epWriter struct {
	in      *epInput
	svcName string // ServiceEntry name, for inline endpoints' workload names
	ns      string
	// The canonical labels of the last label set seen: consecutive
	// endpoints (pods of one workload) usually share their labels.
	last epCanonical
}

// epCanonical is what an endpoint's labels say about its workload.
type epCanonical struct {
	labels  index.LabelSetID
	valid   bool
	podHash string // pod-template-hash, cut from pod names
	name    string // canonical name, when a label gives one
	hasName bool
	rev     string // canonical revision, "" for latest
}

// epWireMeta is what the first pass learns of one endpoint.
type epWireMeta struct {
	workload string // the workload name, or the ServiceEntry name of an inline endpoint
	seq      int32  // ≥ 0 for an inline endpoint: its workload is "workload-seq"
	name     string // canonical name; "" with nameIsWorkload
	isWlName bool   // the canonical name is the workload name
	rev      string
	tls      bool
	health   corev3.HealthStatus
	weight   uint32
	sock     int // SocketAddress size
	md       int // Metadata size
	value    int // length of the "workload;ns;name;rev;cluster" string
}

// canonical returns the canonical labels of a label set (cached for the
// last set).
func (w *epWriter) canonical(labels index.LabelSetID) *epCanonical {
	if w.last.valid && w.last.labels == labels {
		return &w.last
	}
	in := w.in
	c := epCanonical{labels: labels, valid: true}
	l := epLabelsOf(in.names, labels)
	c.podHash = l.podTemplateHash
	c.name, c.hasName, c.rev = l.canonical()
	if c.rev == "latest" {
		c.rev = ""
	}
	w.last = c
	return &w.last
}

// measure fills m for candidate c and returns the LbEndpoint's size.
func (w *epWriter) measure(c *epCandidate, m *epWireMeta) int {
	in := w.in
	var ab [64]byte
	m.sock = sizeBytesField(len(w.address(ab[:0], c)))
	if c.port != 0 {
		m.sock += protowire.SizeTag(3) + protowire.SizeVarint(uint64(c.port))
	}
	m.health = epHealth(in.svc, c.ep)
	m.weight = uint32(c.ep.Weight)
	if m.weight == 0 {
		m.weight = 1
	}

	can := w.canonical(c.ep.Labels)
	m.seq = -1
	m.workload = ""
	switch {
	case c.ep.Workload != 0:
		name := in.names.String(c.ep.Workload)
		m.workload = epCutWorkloadName(name, can.podHash)
	case c.inline:
		m.workload, m.seq = w.svcName, c.seq
	}
	wlLen := len(m.workload)
	if m.seq >= 0 {
		wlLen += 1 + epDigits(m.seq)
	}
	m.name, m.isWlName, m.rev = can.name, !can.hasName, can.rev
	nameLen := len(m.name)
	if m.isWlName {
		nameLen = wlLen
	}
	m.tls = c.ep.TLSMode == index.TLSModeIstio && !in.mtlsDisabled
	m.value = wlLen + len(w.ns) + nameLen + len(m.rev) + len(in.clusterID) + 4
	m.md = structEntrySize("istio", "workload", m.value)
	if m.tls {
		m.md += structEntrySize("envoy.transport_socket_match", "tlsMode", len("istio"))
	}

	addrMsg := sizeBytesField(m.sock) // Address{socket_address: 1}
	epMsg := sizeBytesField(addrMsg)  // Endpoint{address: 1}
	size := sizeBytesField(epMsg) + sizeBytesField(m.md) + sizeUInt32Value(4, m.weight)
	if m.health != 0 {
		size += protowire.SizeTag(2) + protowire.SizeVarint(uint64(m.health))
	}
	return size
}

// address appends the endpoint's address text: its IP, or its hostname.
func (w *epWriter) address(dst []byte, c *epCandidate) []byte {
	if c.ep.Addr.IsValid() {
		return c.ep.Addr.AppendTo(dst)
	}
	return append(dst, w.in.names.String(c.ep.Hostname)...)
}

// appendLbEndpoint appends lb_endpoints (field 2 of LocalityLbEndpoints)
// as measured into m.
func (w *epWriter) appendLbEndpoint(dst []byte, c *epCandidate, m *epWireMeta) []byte {
	addrMsg := sizeBytesField(m.sock)
	epMsg := sizeBytesField(addrMsg)
	size := sizeBytesField(epMsg) + sizeBytesField(m.md) + sizeUInt32Value(4, m.weight)
	if m.health != 0 {
		size += protowire.SizeTag(2) + protowire.SizeVarint(uint64(m.health))
	}
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // endpoint
	dst = protowire.AppendVarint(dst, uint64(epMsg))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // address
	dst = protowire.AppendVarint(dst, uint64(addrMsg))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // socket_address
	dst = protowire.AppendVarint(dst, uint64(m.sock))
	var ab [64]byte
	dst = protowire.AppendTag(dst, 2, protowire.BytesType) // address
	dst = protowire.AppendBytes(dst, w.address(ab[:0], c))
	if c.port != 0 {
		dst = protowire.AppendTag(dst, 3, protowire.VarintType) // port_value
		dst = protowire.AppendVarint(dst, uint64(c.port))
	}
	if m.health != 0 {
		dst = protowire.AppendTag(dst, 2, protowire.VarintType) // health_status
		dst = protowire.AppendVarint(dst, uint64(m.health))
	}
	dst = protowire.AppendTag(dst, 3, protowire.BytesType) // metadata
	dst = protowire.AppendVarint(dst, uint64(m.md))
	dst = w.appendMetadata(dst, m)
	return appendUInt32Value(dst, 4, m.weight) // load_balancing_weight
}

// appendMetadata appends the Metadata message's fields (epMetadata's
// message): filter_metadata entries sorted by key.
func (w *epWriter) appendMetadata(dst []byte, m *epWireMeta) []byte {
	if m.tls {
		dst = appendStructEntryHead(dst, "envoy.transport_socket_match", "tlsMode", len("istio"))
		dst = append(dst, "istio"...)
	}
	dst = appendStructEntryHead(dst, "istio", "workload", m.value)
	dst = w.appendWorkload(dst, m)
	dst = append(dst, ';')
	dst = append(dst, w.ns...)
	dst = append(dst, ';')
	if m.isWlName {
		dst = w.appendWorkload(dst, m)
	} else {
		dst = append(dst, m.name...)
	}
	dst = append(dst, ';')
	dst = append(dst, m.rev...)
	dst = append(dst, ';')
	return append(dst, w.in.clusterID...)
}

func (w *epWriter) appendWorkload(dst []byte, m *epWireMeta) []byte {
	dst = append(dst, m.workload...)
	if m.seq >= 0 {
		dst = append(dst, '-')
		dst = strconv.AppendInt(dst, int64(m.seq), 10)
	}
	return dst
}

// epDigits is the number of decimal digits of n ≥ 0.
func epDigits(n int32) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// structEntrySize is the size of a filter_metadata map entry (field 1 of
// Metadata, tag included) whose value is a Struct with one string field
// of n bytes.
func structEntrySize(key, field string, n int) int {
	val := sizeBytesField(n)                                       // Value{string_value: 3}
	fieldEntry := sizeBytesField(len(field)) + sizeBytesField(val) // Struct.fields entry {key: 1, value: 2}
	strct := sizeBytesField(fieldEntry)                            // Struct{fields: 1}
	entry := sizeBytesField(len(key)) + sizeBytesField(strct)
	return sizeBytesField(entry)
}

// appendStructEntryHead appends a filter_metadata map entry whose value is
// a Struct with one string field of n bytes, up to that string: the caller
// appends its n bytes.
func appendStructEntryHead(dst []byte, key, field string, n int) []byte {
	val := sizeBytesField(n)
	fieldEntry := sizeBytesField(len(field)) + sizeBytesField(val)
	strct := sizeBytesField(fieldEntry)
	entry := sizeBytesField(len(key)) + sizeBytesField(strct)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(entry))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, key)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(strct))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(fieldEntry))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, field)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(val))
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(n))
}

// appendUInt32Value appends a google.protobuf.UInt32Value field.
func appendUInt32Value(dst []byte, num protowire.Number, v uint32) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	if v == 0 {
		return protowire.AppendVarint(dst, 0)
	}
	dst = protowire.AppendVarint(dst, uint64(1+protowire.SizeVarint(uint64(v))))
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(v))
}

func sizeUInt32Value(num protowire.Number, v uint32) int {
	n := 0
	if v != 0 {
		n = 1 + protowire.SizeVarint(uint64(v))
	}
	return sizeBytesField(n) - 1 + protowire.SizeTag(num)
}

// sizeBytesField is the size of a length-delimited field with a one-byte
// tag (field numbers below 16) and n bytes of payload.
func sizeBytesField(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }
