package scenario

import (
	"strings"
	"testing"
)

func TestParseArchive(t *testing.T) {
	a, err := ParseArchive([]byte("apply a.yaml\n# note\n-- a.yaml --\nkind: X\n-- empty --\n-- b.txt --\nno newline"))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Comment) != "apply a.yaml\n# note\n" {
		t.Errorf("comment = %q", a.Comment)
	}
	want := map[string]string{"a.yaml": "kind: X\n", "empty": "", "b.txt": "no newline\n"}
	if len(a.Files) != len(want) {
		t.Fatalf("files = %+v", a.Files)
	}
	for n, w := range want {
		if got, ok := a.File(n); !ok || string(got) != w {
			t.Errorf("%s = %q, %v; want %q", n, got, ok, w)
		}
	}
	if _, err := ParseArchive([]byte("-- a --\n-- a --\n")); err == nil {
		t.Error("a file named twice parsed")
	}
}

func TestCheckField(t *testing.T) {
	doc := []byte(`{"vh":[{"name":"a","routes":[{"t":"1s"}]},{"name":"b","routes":[{"t":"7s"},{"t":"2s"}]}],"n":3}`)
	for _, tc := range []struct {
		path, want, err string
	}{
		{path: ".n", want: "3"},
		{path: ".vh[name=b].routes[1].t", want: `"2s"`},
		{path: ".vh[0]", want: `{"name":"a","routes":[{"t":"1s"}]}`},
		{path: ".vh[name=b].routes[0].t", want: `"1s"`, err: `= "7s", want "1s"`},
		{path: ".vh[name=c]", want: "1", err: `no element with name="c"`},
		{path: ".vh[5]", want: "1", err: "index [5] of 2 elements"},
		{path: ".x", want: "1", err: `no field "x"`},
		{path: "n", want: "1", err: "want .field"},
	} {
		err := checkField(doc, tc.path, tc.want)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("checkField(%s, %s) = %v, want error %q", tc.path, tc.want, err, tc.err)
		}
	}
}
