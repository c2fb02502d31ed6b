package serve

import (
	"fmt"
	"runtime"
	"testing"
)

func TestSharedNames(t *testing.T) {
	list := func() []string {
		var out []string
		for i := 0; i < 100; i++ {
			out = append(out, fmt.Sprintf("outbound|80||svc-%03d.default.svc.cluster.local", i))
		}
		return out
	}
	a, b := sharedNames(list()), sharedNames(list())
	if &a[0] != &b[0] {
		t.Fatal("equal lists are not shared")
	}
	other := list()
	other[5] = "x"
	if c := sharedNames(other); &c[0] == &a[0] {
		t.Fatal("a different list was shared")
	}
	short := []string{"a"}
	if s := sharedNames(short); &s[0] != &short[0] {
		t.Fatal("a short list should be kept as is")
	}
	// Once no stream holds it, the list is collected and a new one stored.
	a, b = nil, nil
	runtime.GC()
	runtime.GC()
	if d := sharedNames(list()); len(d) != 100 {
		t.Fatalf("list after collection has %d names", len(d))
	}
}
