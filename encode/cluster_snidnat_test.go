package encode

import "testing"

func TestParseSNIDNATName(t *testing.T) {
	for _, c := range []struct {
		name         string
		port         uint32
		subset, host string
		ok           bool
	}{
		{"outbound_.9080_._.reviews.shop.svc.cluster.local", 9080, "", "reviews.shop.svc.cluster.local", true},
		{"outbound_.443_.v1_.a.b", 443, "v1", "a.b", true},
		{"outbound|9080||reviews.shop.svc.cluster.local", 0, "", "", false},
		{"outbound_.0_._.a", 0, "", "", false},
		{"outbound_.x_._.a", 0, "", "", false},
		{"outbound_.80_._.", 0, "", "", false},
		{"outbound_.80", 0, "", "", false},
		{"outbound_.080_._.a", 0, "", "", false},
	} {
		p, s, h, ok := ParseSNIDNATName(c.name)
		if p != c.port || s != c.subset || h != c.host || ok != c.ok {
			t.Errorf("ParseSNIDNATName(%q) = %d %q %q %v", c.name, p, s, h, ok)
		}
		if ok && ClusterSNI(p, s, h) != c.name {
			t.Errorf("%q does not round-trip: %q", c.name, ClusterSNI(p, s, h))
		}
	}
}

// FuzzParseSNIDNATName: EDS request names are outside input. A name that
// parses rebuilds to itself; nothing panics.
func FuzzParseSNIDNATName(f *testing.F) {
	for _, s := range []string{"outbound_.9080_._.reviews.shop.svc.cluster.local", "outbound_.443_.v1_.a.b", "outbound_._._.", "outbound|80||a", "outbound_.80_._._._."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, s, h, ok := ParseSNIDNATName(name)
		if !ok {
			return
		}
		if p == 0 || h == "" {
			t.Fatalf("%q: port %d host %q accepted", name, p, h)
		}
		if ClusterSNI(p, s, h) != name {
			t.Fatalf("%q parsed to %d %q %q, which does not rebuild it", name, p, s, h)
		}
	})
}
