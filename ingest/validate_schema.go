package ingest

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// The schema checks run inside Decode, before the typed decoders. The typed
// decoders (protojson for Istio specs, strict encoding/json for Kubernetes
// objects) stop at the first problem and name no field path; these walk the
// generic value of the document instead and report every unknown field and
// wrong type with its path, so that each error can carry the line of its
// field. They accept what istiod's decoder accepts (jsonpb, which reads
// durations in Go's syntax, "1m30s", where protojson wants "90s"), and
// rewrite durations so that protojson accepts the same.

// schema walks one document's generic value (maps, lists, scalars as YAML
// produced them, map keys already strings).
type schema struct{ r *reporter }

func (s *schema) fail(p *fieldPath, format string, args ...any) {
	s.r.add(ErrSchema, p, fmt.Sprintf(format, args...))
}

// protoMessage checks v against md the way istiod's decoder (jsonpb) reads
// it: fields by JSON or proto name, null means unset, well-known types in
// their JSON forms, durations in Go's syntax ("1m30s"). It returns v with
// durations rewritten into protojson's form ("90s"), which Decode then
// reads with protojson.
func (s *schema) protoMessage(md protoreflect.MessageDescriptor, v any, p *fieldPath) any {
	if v == nil {
		return v
	}
	if w, ok := s.wellKnown(md, v, p); ok {
		return w
	}
	m, ok := v.(map[string]any)
	if !ok {
		s.fail(p, "must be an object, not %s", describe(v))
		return v
	}
	fields := md.Fields()
	var set map[protoreflect.FullName]string // oneof or field → key that set it
	for _, key := range sortedKeys(m) {
		val := m[key]
		fp := p.f(key)
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(key))
		}
		if fd == nil {
			s.fail(fp, "unknown field%s", suggest(key, protoFieldNames(md)))
			continue
		}
		if val == nil {
			continue
		}
		if set == nil {
			set = make(map[protoreflect.FullName]string)
		}
		if prev, dup := set[fd.FullName()]; dup {
			s.fail(fp, "set twice, as %q and %q", prev, key)
			continue
		}
		set[fd.FullName()] = key
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if prev, dup := set[od.FullName()]; dup {
				s.fail(fp, "cannot be set together with %q: set only one of %s", prev, oneofNames(od))
				continue
			}
			set[od.FullName()] = key
		}
		m[key] = s.protoField(fd, val, fp)
	}
	return m
}

func (s *schema) protoField(fd protoreflect.FieldDescriptor, v any, p *fieldPath) any {
	switch {
	case fd.IsList():
		l, ok := v.([]any)
		if !ok {
			s.fail(p, "must be a list, not %s", describe(v))
			return v
		}
		for i, e := range l {
			if e == nil {
				s.fail(p.i(i), "must not be null")
				continue
			}
			l[i] = s.protoScalar(fd, e, p.i(i))
		}
	case fd.IsMap():
		m, ok := v.(map[string]any)
		if !ok {
			s.fail(p, "must be an object, not %s", describe(v))
			return v
		}
		kfd, vfd := fd.MapKey(), fd.MapValue()
		for _, key := range sortedKeys(m) {
			kp := p.k(key)
			if kfd.Kind() != protoreflect.StringKind {
				s.protoScalar(kfd, key, kp)
			}
			if m[key] == nil {
				s.fail(kp, "must not be null")
				continue
			}
			m[key] = s.protoScalar(vfd, m[key], kp)
		}
	default:
		return s.protoScalar(fd, v, p)
	}
	return v
}

// protoScalar checks one value of a singular field, a list element or a map
// entry.
func (s *schema) protoScalar(fd protoreflect.FieldDescriptor, v any, p *fieldPath) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			s.fail(p, "must be true or false, not %s", describe(v))
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		s.integer(v, p, math.MinInt32, math.MaxInt32, true)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		s.integer(v, p, math.MinInt64, math.MaxInt64, true)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		s.integer(v, p, 0, math.MaxUint32, true)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s.integer(v, p, 0, math.MaxUint64, true)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		s.float(v, p, fd.Kind() == protoreflect.FloatKind)
	case protoreflect.StringKind:
		if _, ok := v.(string); !ok {
			s.fail(p, "must be a string, not %s", describe(v))
		}
	case protoreflect.BytesKind:
		str, ok := v.(string)
		if !ok {
			s.fail(p, "must be a base64 string, not %s", describe(v))
		} else if _, err := base64.StdEncoding.DecodeString(str); err != nil {
			s.fail(p, "must be base64: %v", err)
		}
	case protoreflect.EnumKind:
		s.enum(fd.Enum(), v, p)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return s.protoMessage(fd.Message(), v, p)
	}
	return v
}

func (s *schema) enum(ed protoreflect.EnumDescriptor, v any, p *fieldPath) {
	if str, ok := v.(string); ok {
		if ed.Values().ByName(protoreflect.Name(str)) == nil {
			s.fail(p, "unknown value %q, must be one of %s", str, enumNames(ed))
		}
		return
	}
	s.integer(v, p, math.MinInt32, math.MaxInt32, false)
}

// wellKnown checks the types with a special JSON form; false if md is not
// one. It returns v, with a duration rewritten for protojson.
func (s *schema) wellKnown(md protoreflect.MessageDescriptor, v any, p *fieldPath) (any, bool) {
	name := md.FullName()
	if name.Parent() != "google.protobuf" {
		return v, false
	}
	switch name.Name() {
	case "Duration":
		str, ok := v.(string)
		if !ok {
			s.fail(p, "must be a duration string such as \"5s\" or \"1m30s\", not %s", describe(v))
		} else if d, err := time.ParseDuration(str); err != nil {
			s.fail(p, "invalid duration %q, want a number with a unit such as \"250ms\", \"5s\" or \"1h\"", str)
		} else {
			return protoDuration(d), true
		}
	case "Timestamp":
		str, ok := v.(string)
		if !ok {
			s.fail(p, "must be an RFC 3339 timestamp string, not %s", describe(v))
		} else if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
			s.fail(p, "invalid RFC 3339 timestamp %q", str)
		}
	case "BoolValue", "BytesValue", "StringValue", "Int32Value", "UInt32Value",
		"Int64Value", "UInt64Value", "FloatValue", "DoubleValue":
		return s.protoScalar(md.Fields().ByNumber(1), v, p), true
	case "Struct":
		if _, ok := v.(map[string]any); !ok {
			s.fail(p, "must be an object, not %s", describe(v))
		}
	case "ListValue":
		if _, ok := v.([]any); !ok {
			s.fail(p, "must be a list, not %s", describe(v))
		}
	case "Value", "Any":
		// Anything goes here; the typed decoder has the last word.
	default:
		return v, false
	}
	return v, true
}

// protoDuration formats d the way protojson reads durations: seconds with
// up to nine decimals, e.g. "90s" or "-0.250s".
func protoDuration(d time.Duration) string {
	sign := ""
	u := uint64(d)
	if d < 0 {
		sign, u = "-", uint64(-(d+1))+1
	}
	secs, nanos := u/1e9, u%1e9
	if nanos == 0 {
		return fmt.Sprintf("%s%ds", sign, secs)
	}
	return strings.TrimRight(fmt.Sprintf("%s%d.%09d", sign, secs, nanos), "0") + "s"
}

// integer checks that v is a whole number in [lo, hi]; quoted allows the
// number to be a string too, as protobuf's JSON mapping does for integers.
func (s *schema) integer(v any, p *fieldPath, lo int64, hi uint64, quoted bool) {
	var (
		neg bool
		mag uint64
	)
	switch n := v.(type) {
	case int:
		neg, mag = n < 0, absInt(int64(n))
	case int64:
		neg, mag = n < 0, absInt(n)
	case uint64:
		mag = n
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || math.Abs(n) >= 1<<64 {
			s.fail(p, "must be a whole number, not %v", n)
			return
		}
		neg, mag = n < 0, uint64(math.Abs(n))
	case string:
		if !quoted {
			s.fail(p, "must be a number, not %s", describe(v))
			return
		}
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			neg, mag = i < 0, absInt(i)
		} else if u, err := strconv.ParseUint(n, 10, 64); err == nil {
			mag = u
		} else {
			s.fail(p, "must be a whole number, not %q", n)
			return
		}
	default:
		s.fail(p, "must be a number, not %s", describe(v))
		return
	}
	if (neg && (lo >= 0 || mag > uint64(-(lo+1))+1)) || (!neg && mag > hi) {
		s.fail(p, "%s%d is out of range [%d, %d]", sign(neg), mag, lo, hi)
	}
}

func (s *schema) float(v any, p *fieldPath, single bool) {
	var f float64
	switch n := v.(type) {
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case uint64:
		f = float64(n)
	case float64:
		f = n
		if math.IsInf(n, 0) || math.IsNaN(n) {
			s.fail(p, "must be a finite number (write \"Infinity\" or \"NaN\" quoted)")
			return
		}
	case string:
		if n == "NaN" || n == "Infinity" || n == "-Infinity" {
			return
		}
		var err error
		if f, err = strconv.ParseFloat(n, 64); err != nil {
			s.fail(p, "must be a number, not %q", n)
			return
		}
	default:
		s.fail(p, "must be a number, not %s", describe(v))
		return
	}
	if single && math.Abs(f) > math.MaxFloat32 {
		s.fail(p, "%v is out of range for a 32-bit float", f)
	}
}

func absInt(i int64) uint64 {
	if i < 0 {
		return uint64(-(i + 1)) + 1
	}
	return uint64(i)
}

func sign(neg bool) string {
	if neg {
		return "-"
	}
	return ""
}

// describe names a generic value's JSON type for messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("a string (%q)", truncate(v, 40))
	case bool:
		return fmt.Sprintf("a boolean (%v)", v)
	case int, int64, uint64, float64:
		return fmt.Sprintf("a number (%v)", v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func protoFieldNames(md protoreflect.MessageDescriptor) []string {
	fs := md.Fields()
	names := make([]string, 0, fs.Len())
	for i := range fs.Len() {
		names = append(names, fs.Get(i).JSONName())
	}
	return names
}

func oneofNames(od protoreflect.OneofDescriptor) string {
	fs := od.Fields()
	names := make([]string, 0, fs.Len())
	for i := range fs.Len() {
		names = append(names, fs.Get(i).JSONName())
	}
	return strings.Join(names, ", ")
}

func enumNames(ed protoreflect.EnumDescriptor) string {
	vs := ed.Values()
	names := make([]string, 0, vs.Len())
	for i := range vs.Len() {
		names = append(names, string(vs.Get(i).Name()))
	}
	return strings.Join(names, ", ")
}

// suggest returns ` (did you mean "x"?)` for the known name closest to
// key, if one is close enough to be a likely typo or a case slip.
func suggest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if strings.EqualFold(k, key) || foldName(k) == foldName(key) {
			return fmt.Sprintf(" (did you mean %q?)", k)
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(k), bestD); d < bestD && d*3 <= len(k) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b, or max when it is at
// least max (names are short; this only ranks typos).
func editDistance(a, b string, max int) int {
	if d := len(a) - len(b); d >= max || -d >= max {
		return max
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max)
}
