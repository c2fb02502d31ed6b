package rules

import (
	"strings"
	"testing"
)

// TestPullSecretName: the Secret name istiod reads of imagePullSecret (its
// namespace is always the plugin's).
func TestPullSecretName(t *testing.T) {
	for in, want := range map[string]string{
		"pull":                    "pull",
		"kubernetes://pull":       "pull",
		"kubernetes://other/pull": "pull",
		"other/pull":              "pull",
		"":                        "",
		"kubernetes://":           "",
		"kubernetes://a/b/c":      "b",
		"a/":                      "",
	} {
		got, ok := PullSecretName(in)
		if got := map[bool]string{true: got, false: ""}[ok]; got != want {
			t.Errorf("PullSecretName(%q) = %q (ok %v), want %q", in, got, ok, want)
		}
	}
}

// FuzzPullSecretName: any user string gives a name without "/" or none.
func FuzzPullSecretName(f *testing.F) {
	for _, s := range []string{"pull", "kubernetes://ns/pull", "a/b/c", "kubernetes://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, ok := PullSecretName(s)
		if ok && (name == "" || strings.Contains(name, "/")) {
			t.Fatalf("PullSecretName(%q) = %q, ok", s, name)
		}
	})
}
