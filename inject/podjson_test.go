package inject

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzAppendJSON: appendJSON of any decoded JSON value decodes to the
// same value (it replaces json.Marshal between merge and typed decode).
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,-3e-7,1e21,true,null,"x\"\\\u0001é\u2028"],"b":{}}`, `"\xff"`, `[]`, `0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		out, err := appendJSON(nil, v)
		if err != nil {
			t.Fatalf("appendJSON(%s): %v", b, err)
		}
		var w any
		if err := json.Unmarshal(out, &w); err != nil {
			t.Fatalf("appendJSON(%s) = %s: not JSON: %v", b, out, err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("appendJSON(%s) = %s: decodes to %#v, want %#v", b, out, w, v)
		}
	})
}
