package inject

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeJSON decodes one JSON value as encoding/json's Decoder with
// UseNumber does (objects as map[string]any, arrays as []any, numbers as
// json.Number), in one pass: the patch's two pods (json.Marshal's
// output) are decoded with it, where encoding/json's generic decoding,
// which scans the text twice, was a sixth of an injection's CPU. Trailing
// text after the value is an error; so is anything encoding/json rejects
// (FuzzDecodeJSON compares them).
func decodeJSON(b []byte) (any, error) { return decodeJSONText(b, false) }

// decodeJSONFloats is decodeJSON with numbers as float64, as
// json.Unmarshal into an empty interface gives them (a number float64
// cannot hold is an error, as there).
func decodeJSONFloats(b []byte) (any, error) { return decodeJSONText(b, true) }

func decodeJSONText(b []byte, floats bool) (any, error) {
	d := jsonDecoder{b: b, s: string(b), floats: floats}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.b) {
		return nil, d.fail("text after the value")
	}
	return v, nil
}

var errJSON = errors.New("invalid JSON")

// maxJSONDepth bounds nesting as encoding/json does (10,000).
const maxJSONDepth = 10000

type jsonDecoder struct {
	b []byte
	s string // b as a string: strings and numbers without escapes are slices of it, not copies
	i int
	// floats: numbers as float64, not json.Number
	floats bool
}

func (d *jsonDecoder) fail(what string) error {
	return &jsonError{what: what, off: d.i}
}

type jsonError struct {
	what string
	off  int
}

func (e *jsonError) Error() string {
	return errJSON.Error() + ": " + e.what + " at offset " + strconv.Itoa(e.off)
}

func (e *jsonError) Unwrap() error { return errJSON }

func (d *jsonDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, d.fail("nesting too deep")
	}
	d.space()
	if d.i >= len(d.b) {
		return nil, d.fail("unexpected end")
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, d.fail("unexpected character")
}

func (d *jsonDecoder) literal(word string) error {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return d.fail("invalid literal")
	}
	d.i += len(word)
	return nil
}

func (d *jsonDecoder) object(depth int) (any, error) {
	d.i++ // {
	m := map[string]any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, d.fail("want an object key")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, d.fail("want ':'")
		}
		d.i++
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
		d.space()
		if d.i >= len(d.b) {
			return nil, d.fail("unexpected end")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, nil
		default:
			return nil, d.fail("want ',' or '}'")
		}
	}
}

func (d *jsonDecoder) array(depth int) (any, error) {
	d.i++ // [
	l := []any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return l, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		l = append(l, v)
		d.space()
		if d.i >= len(d.b) {
			return nil, d.fail("unexpected end")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return l, nil
		default:
			return nil, d.fail("want ',' or ']'")
		}
	}
}

// number reads JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *jsonDecoder) number() (any, error) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case digits() == 0:
		return nil, d.fail("invalid number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	if d.floats {
		f, err := strconv.ParseFloat(d.s[start:d.i], 64)
		if err != nil {
			return nil, d.fail("number out of range")
		}
		return f, nil
	}
	return json.Number(d.s[start:d.i]), nil
}

// str reads a string; one without escapes is a slice of d.s.
func (d *jsonDecoder) str() (string, error) {
	d.i++ // "
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.s[start:d.i]
			d.i++
			return s, nil
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", d.fail("control character in string")
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				return d.escaped(start) // invalid UTF-8 becomes U+FFFD
			}
			d.i += size
		}
	}
	return "", d.fail("unterminated string")
}

// escaped reads the rest of a string that has escapes or invalid UTF-8,
// from start (just after its quote).
func (d *jsonDecoder) escaped(start int) (string, error) {
	out := make([]byte, 0, d.i-start+16)
	out = append(out, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), nil
		case c == '\\':
			d.i++
			if d.i >= len(d.b) {
				return "", d.fail("unterminated string")
			}
			e := d.b[d.i]
			d.i++
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", d.fail("invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
						save := d.i
						d.i += 2
						if r2, ok2 = d.hex4(); !ok2 {
							return "", d.fail("invalid \\u escape")
						}
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							continue
						}
						d.i = save // not a pair: the second escape stands alone
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", d.fail("invalid escape")
			}
		case c < 0x20:
			return "", d.fail("control character in string")
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			out = utf8.AppendRune(out, r) // U+FFFD for invalid UTF-8, as encoding/json
			d.i += size
		}
	}
	return "", d.fail("unterminated string")
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}
