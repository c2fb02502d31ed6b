package index

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestRowHashCoversEveryField changes each field of each hashed row type,
// one at a time (and each list's length), and checks that the content hash
// changes, and that no two of those changes hash alike: rows hash their
// fields packed two or more to a word, and a field left out, or packed over
// another, would let a changed row pass for unchanged.
func TestRowHashCoversEveryField(t *testing.T) {
	addr := netip.MustParseAddr("10.1.2.3")
	// Rows with every list of length one and distinct field values.
	svc := &Service{
		Key: ServiceKey{Host: 11, Namespace: 12}, Name: 13, Origin: OriginKubernetes,
		Addresses: []netip.Prefix{netip.PrefixFrom(addr, 32)},
		Ports:     []Port{{Name: 14, Number: 80, TargetPort: 8080, Protocol: ProtocolHTTP}},
		ExportTo:  ExportTo{Namespaces: []Sym{15}}, Labels: 16, Selector: 17, ExternalName: 18,
		SubjectAltNames: []Sym{19},
	}
	wl := &Workload{
		Key: WorkloadKey{Kind: WorkloadPod, Namespace: 11, Name: 12}, Addr: addr, Labels: 13,
		ServiceAccount: 14, Node: 15, Locality: 16, Network: 17, TLSMode: TLSModeIstio,
		Ports: []EndpointPort{{Name: 18, Port: 9080, Protocol: ProtocolHTTP}},
	}
	ns := &Namespace{Name: 11, Labels: 12}
	group := &EndpointGroup{
		Source: 11, Ports: []EndpointPort{{Name: 12, Port: 8080, Protocol: ProtocolHTTP}},
		Endpoints: []Endpoint{{
			Addr: addr, Hostname: 13, Workload: 14, Labels: 15, ServiceAccount: 16,
			Locality: 17, Network: 18, Weight: 3, Health: HealthDraining, TLSMode: TLSModeIstio,
		}},
	}
	for _, tc := range []struct {
		name string
		row  any // a pointer to the row hash reads
		hash func() uint64
	}{
		{"Service", svc, svc.computeHash},
		{"Workload", wl, wl.computeHash},
		{"Namespace", ns, ns.computeHash},
		{"EndpointGroup", group, group.computeHash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.hash()
			seen := map[uint64]string{base: "(unchanged)"}
			fields := 0
			mutations(reflect.ValueOf(tc.row).Elem(), tc.name, func(path string) {
				fields++
				h := tc.hash()
				if prev, dup := seen[h]; dup {
					t.Errorf("changing %s hashes like %s", path, prev)
				}
				seen[h] = path
			})
			if tc.hash() != base {
				t.Fatal("mutations did not restore the row")
			}
			if want := reflect.ValueOf(tc.row).Elem().NumField() - 1; fields < want {
				t.Fatalf("%d mutations, want at least one per field (%d)", fields, want)
			}
		})
	}
}

// mutations changes each leaf field of v in turn (and each slice's length),
// calling check after each change and restoring the field after it. Hash
// fields are skipped.
func mutations(v reflect.Value, path string, check func(path string)) {
	switch x := v.Interface().(type) {
	case netip.Addr:
		v.Set(reflect.ValueOf(netip.MustParseAddr("fd00::7")))
		check(path)
		v.Set(reflect.ValueOf(x))
		return
	case netip.Prefix:
		v.Set(reflect.ValueOf(netip.PrefixFrom(netip.MustParseAddr("fd00::7"), 128)))
		check(path + ".Addr")
		v.Set(reflect.ValueOf(netip.PrefixFrom(x.Addr(), x.Bits()-1)))
		check(path + ".Bits")
		v.Set(reflect.ValueOf(x))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.Name != "Hash" && f.IsExported() {
				mutations(v.Field(i), path+"."+f.Name, check)
			}
		}
	case reflect.Slice:
		old := reflect.ValueOf(v.Interface())
		longer := reflect.AppendSlice(reflect.MakeSlice(v.Type(), 0, old.Len()+1), old)
		v.Set(reflect.Append(longer, old.Index(old.Len()-1)))
		check(path + ".len")
		v.Set(old)
		for i := 0; i < v.Len(); i++ {
			mutations(v.Index(i), path+"[]", check)
		}
	case reflect.Bool:
		v.SetBool(!v.Bool())
		check(path)
		v.SetBool(!v.Bool())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
		check(path)
		v.SetUint(v.Uint() - 1)
	default:
		panic("mutations: no mutation for " + v.Kind().String() + " at " + path)
	}
}
