package serve

import (
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

func TestClip(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "abc", 8, "abc"},
		{"exact", "abcdefgh", 8, "abcdefgh"},
		{"long", strings.Repeat("x", 1000), 4, "xxxx...(1000 bytes)"},
		{"rune boundary", "ab\u00e9cd", 3, "ab...(6 bytes)"}, // é is 2 bytes: not cut in half
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := clip(tc.in, tc.n)
			if got != tc.want || !utf8.ValidString(got) {
				t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
	big := strings.Repeat("y", 1<<20)
	if k := keepClipped(big[:10], 64); unsafe.StringData(k) == unsafe.StringData(big) {
		t.Error("keepClipped of a short substring shares the large string")
	}
}

func TestVersionIs(t *testing.T) {
	for _, v := range []uint64{0, 1, 0xdeadbeef, ^uint64(0)} {
		if !versionIs(versionString(v), v) || versionIs(versionString(v), v+1) || versionIs(versionString(v)[1:], v) {
			t.Errorf("versionIs(%s, %x)", versionString(v), v)
		}
	}
}
