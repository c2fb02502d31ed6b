package loadgen

import (
	"bytes"
	"fmt"
	"strconv"
)

// A parser of the Prometheus text exposition format (version 0.0.4, as
// client_golang serves it by default; OpenMetrics' "# EOF" and float
// timestamps are accepted too), enough to read a server's counters and
// gauges. It reads what a server under test wrote, so it trusts nothing:
// every line is checked and an error names the first bad line; the caller
// bounds the input's size (maxMetricsBytes).

// parseProm calls visit with the name and value of every sample in text,
// in order, and returns an ErrMetrics naming the first malformed line.
// Labels are checked and skipped; comments (# HELP, # TYPE) are skipped.
// name is only valid during the call.
func parseProm(text []byte, visit func(name []byte, value float64)) error {
	for n := 1; len(text) > 0; n++ {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimRight(line, "\r")
		line = trimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name, value, err := parsePromLine(line)
		if err != nil {
			return fmt.Errorf("%w: line %d: %s: %q", ErrMetrics, n, err, excerpt(line))
		}
		visit(name, value)
	}
	return nil
}

// parsePromLine parses one sample: name[{labels}] value [timestamp].
func parsePromLine(line []byte) (name []byte, value float64, err error) {
	i := 0
	for i < len(line) && isNameByte(line[i], i == 0, true) {
		i++
	}
	if i == 0 {
		return nil, 0, errString("no metric name")
	}
	name, line = line[:i], line[i:]
	spaced := len(line) > 0 && isSpace(line[0])
	line = trimSpace(line)
	if len(line) > 0 && line[0] == '{' {
		if line, err = skipLabels(line[1:]); err != nil {
			return nil, 0, err
		}
		line, spaced = trimSpace(line), true
	}
	if !spaced || len(line) == 0 {
		return nil, 0, errString("no value after the metric name")
	}
	tok, rest := cutToken(line)
	value, err = strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return nil, 0, errString("bad value")
	}
	if tok, rest = cutToken(trimSpace(rest)); len(tok) > 0 {
		if _, err := strconv.ParseFloat(string(tok), 64); err != nil {
			return nil, 0, errString("bad timestamp")
		}
	}
	if len(trimSpace(rest)) > 0 {
		return nil, 0, errString("text after the timestamp")
	}
	return name, value, nil
}

// skipLabels skips `name="value",...}` (after the '{') and returns what
// follows the '}'.
func skipLabels(s []byte) ([]byte, error) {
	for {
		s = trimSpace(s)
		if len(s) > 0 && s[0] == '}' {
			return s[1:], nil
		}
		i := 0
		for i < len(s) && isNameByte(s[i], i == 0, false) {
			i++
		}
		if i == 0 {
			return nil, errString("bad label name")
		}
		s = trimSpace(s[i:])
		if len(s) == 0 || s[0] != '=' {
			return nil, errString("no '=' after a label name")
		}
		s = trimSpace(s[1:])
		if len(s) == 0 || s[0] != '"' {
			return nil, errString("label value not quoted")
		}
		s = s[1:]
		for {
			j := bytes.IndexAny(s, `"\`)
			if j < 0 {
				return nil, errString("unterminated label value")
			}
			if s[j] == '"' {
				s = s[j+1:]
				break
			}
			if j+1 >= len(s) {
				return nil, errString("unterminated label value")
			}
			s = s[j+2:] // an escape: \\, \" or \n
		}
		s = trimSpace(s)
		switch {
		case len(s) > 0 && s[0] == ',':
			s = s[1:]
		case len(s) > 0 && s[0] == '}':
		default:
			return nil, errString("no ',' or '}' after a label")
		}
	}
}

// isNameByte: metric names are [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]*.
func isNameByte(c byte, first, colon bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c == ':':
		return colon
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func trimSpace(s []byte) []byte {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// cutToken splits s at its first space.
func cutToken(s []byte) (tok, rest []byte) {
	for i, c := range s {
		if isSpace(c) {
			return s[:i], s[i:]
		}
	}
	return s, nil
}

// excerpt is the start of a bad line, for an error message.
func excerpt(line []byte) string {
	const n = 80
	if len(line) > n {
		return string(line[:n]) + "..."
	}
	return string(line)
}

type errString string

func (e errString) Error() string { return string(e) }
