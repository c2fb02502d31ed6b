package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// marshalAny renders a resource as protojson (nested Anys resolved through
// the types linked into the test binary).
func marshalAny(a *anypb.Any) (json.RawMessage, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return nil, err
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

// checkField compares the value at path in the resource's JSON with want.
func checkField(doc json.RawMessage, path, want string) error {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return err
	}
	got, err := walk(root, path)
	if err != nil {
		return fmt.Errorf("%s: %w in:\n%s", path, err, doc)
	}
	var wantV any
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		return fmt.Errorf("want %s: not JSON: %w", want, err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(wantV)
	if !bytes.Equal(gb, wb) {
		return fmt.Errorf("%s = %s, want %s", path, gb, wb)
	}
	return nil
}

// walk follows a path of .field, [index] and [key=value] steps.
func walk(v any, path string) (any, error) {
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			field := path[:end]
			path = path[end:]
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("field %q of a %T", field, v)
			}
			if v, ok = m[field]; !ok {
				return nil, fmt.Errorf("no field %q", field)
			}
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [")
			}
			sel := path[1:end]
			path = path[end+1:]
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("[%s] of a %T", sel, v)
			}
			key, val, byKey := strings.Cut(sel, "=")
			if !byKey {
				i, err := strconv.Atoi(sel)
				if err != nil || i < 0 || i >= len(list) {
					return nil, fmt.Errorf("index [%s] of %d elements", sel, len(list))
				}
				v = list[i]
				continue
			}
			found := false
			for _, e := range list {
				if m, ok := e.(map[string]any); ok && m[key] == val {
					v, found = e, true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("no element with %s=%q", key, val)
			}
		default:
			return nil, fmt.Errorf("path step %q: want .field, [i] or [key=value]", path)
		}
	}
	return v, nil
}
