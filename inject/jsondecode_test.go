package inject

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeJSON: decodeJSON accepts what encoding/json (with UseNumber,
// one value and nothing after it) accepts, and decodes it the same.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-2.5e+3,"x\u00e9\ud83d\ude00\n",true,false,null,{}],"b":{"c":[]}}`,
		`"\ud800"`, `"\ud800\u0041"`, `"\xff"`, `0`, `-0.0e-0`, `01`, `1.`, `[1,]`, `{"a" 1}`, ` [ ] `, `{} x`,
		`"\/\b\f\r\t\\"`, `"a` + "\x01" + `"`, `nul`, `-`, `1e`, `{"k":"v","k":"w"}`, `1e400`, `-1e-400`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeJSON(b)
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var want any
		werr := d.Decode(&want)
		if werr == nil && len(bytes.TrimLeft(b[d.InputOffset():], " \t\r\n")) > 0 {
			werr = errJSON // encoding/json's Unmarshal refuses text after the value
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decodeJSON error %v, encoding/json %v", b, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeJSON %#v, encoding/json %#v", b, got, want)
		}
		got, err = decodeJSONFloats(b)
		want = nil
		werr = json.Unmarshal(b, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decodeJSONFloats error %v, json.Unmarshal %v", b, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeJSONFloats %#v, json.Unmarshal %#v", b, got, want)
		}
	})
}

// BenchmarkDecodeJSON decodes an injected pod's JSON with decodeJSON and
// with encoding/json (UseNumber), as createPatch did before.
func BenchmarkDecodeJSON(b *testing.B) {
	s := foldSettings(b)["default"]
	in, err := New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	res, err := in.Inject(Request{Pod: foldPods(b)[0].pod, Namespace: "default"})
	if err != nil {
		b.Fatal(err)
	}
	pod, err := json.Marshal(res.Pod)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(pod)))
		for b.Loop() {
			if _, err := decodeJSON(pod); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(pod)))
		for b.Loop() {
			d := json.NewDecoder(bytes.NewReader(pod))
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
