package index

import (
	"strconv"
	"strings"
	"testing"
)

// TestSymbolsRoundTrip interns strings across several table growths and
// chunk boundaries, long ones (outside the slabs) included, and checks that
// each resolves back, is found again, and does not alias the caller's bytes.
func TestSymbolsRoundTrip(t *testing.T) {
	s := NewSymbols()
	if id := s.Intern(""); id != 0 {
		t.Fatalf("Intern(\"\") = %d, want 0", id)
	}
	buf := []byte(strings.Repeat("x", 300))
	long := s.Intern(string(buf))
	var want []string
	var ids []Sym
	for i := 0; i < 5000; i++ {
		str := "host-" + strconv.Itoa(i) + ".ns.svc.cluster.local"
		want = append(want, str)
		ids = append(ids, s.Intern(str))
	}
	for i, str := range want {
		if got := s.String(ids[i]); got != str {
			t.Fatalf("String(%d) = %q, want %q", ids[i], got, str)
		}
		if id, ok := s.Lookup(str); !ok || id != ids[i] {
			t.Fatalf("Lookup(%q) = %d, %v; want %d", str, id, ok, ids[i])
		}
		if id := s.Intern(str); id != ids[i] {
			t.Fatalf("second Intern(%q) = %d, want %d", str, id, ids[i])
		}
	}
	buf[0] = 'y'
	if got := s.String(long); got != strings.Repeat("x", 300) {
		t.Fatalf("long symbol changed with the caller's buffer: %q", got[:5])
	}
	if _, ok := s.Lookup("never-interned"); ok {
		t.Fatal("Lookup found a string never interned")
	}
	if s.Len() != 5000+2 {
		t.Fatalf("Len = %d, want %d", s.Len(), 5002)
	}
	if n := testing.AllocsPerRun(100, func() { s.Lookup(want[4321]); s.Intern(want[17]) }); n != 0 {
		t.Fatalf("Lookup and Intern of a known string allocate %v times", n)
	}
}
