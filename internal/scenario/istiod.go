package scenario

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// The commands that compare with istiod's own output (internal/istiodref):
//
//	case NAME                  apply the case's config.yaml and connect
//	                           each proxy of its proxies.yaml by its name
//	istiod PROXY TYPE RES [PATH]
//	                           the resource (or its part at PATH) equals
//	                           istiod's for the same proxy, field by field

// loadCase applies istiodref case name and connects its proxies.
func (s *script) loadCase(name string) error {
	c, err := istiodref.LoadCase(name)
	if err != nil {
		return err
	}
	if err := s.target.Mesh().Apply("istiodref/"+name+"/config.yaml", c.Config); err != nil {
		return err
	}
	s.changed()
	s.istiodCase = c
	for _, p := range c.Proxies {
		md, err := structpb.NewStruct(p.Metadata)
		if err != nil {
			return fmt.Errorf("%s: proxy %s: %w", name, p.Name, err)
		}
		s.proxies[p.Name] = &proxy{f: s.target.Connect(s.t, &corev3.Node{Id: p.ID, Metadata: md})}
	}
	return nil
}

// compareIstiod runs: istiod PROXY TYPE RES [PATH].
func (s *script) compareIstiod(args []string) error {
	if len(args) < 3 || len(args) > 4 {
		return fmt.Errorf("istiod wants PROXY TYPE RES [PATH]")
	}
	c := s.istiodCase
	if c == nil {
		return fmt.Errorf("no case loaded (case NAME)")
	}
	i := slices.IndexFunc(c.Proxies, func(p istiodref.Proxy) bool { return p.Name == args[0] })
	if i < 0 {
		return fmt.Errorf("case %s has no proxy %q", c.Name, args[0])
	}
	dump, err := istiodref.ReadDump(c.DumpFile(c.Proxies[i]))
	if err != nil {
		return fmt.Errorf("istiod's output for case %s (make istiod-ref CASE=%s): %w", c.Name, c.Name, err)
	}
	theirs := map[string]map[string]map[string]any{"cds": dump.Clusters, "eds": dump.Endpoints, "lds": dump.Listeners, "rds": dump.Routes}[args[1]]
	if theirs == nil {
		return fmt.Errorf("unknown type %q (cds, eds, lds, rds)", args[1])
	}
	want, ok := theirs[args[2]]
	if !ok {
		return fmt.Errorf("istiod sent %s no %s %q", args[0], args[1], args[2])
	}
	res, err := s.resources(args[0], args[1])
	if err != nil {
		return err
	}
	raw, ok := res[args[2]]
	if !ok {
		return fmt.Errorf("pilotfish sent %s no %s %q (istiod did)", args[0], args[1], args[2])
	}
	var got any
	if err := json.Unmarshal(raw, &got); err != nil {
		return err
	}
	var wantV any = want
	if len(args) == 4 {
		if wantV, err = walk(wantV, args[3]); err != nil {
			return fmt.Errorf("istiod's %s: %w", args[3], err)
		}
		if got, err = walk(got, args[3]); err != nil {
			return fmt.Errorf("pilotfish's %s: %w", args[3], err)
		}
	}
	var diffs []string
	Diff(args[2]+strings.Join(args[3:], ""), wantV, got, &diffs)
	if len(diffs) > 0 {
		return fmt.Errorf("differs from istiod (want is istiod's):\n  %s", strings.Join(diffs, "\n  "))
	}
	return nil
}

// Diff appends to out a line for each path where got differs from want
// (generic JSON values).
func Diff(path string, want, got any, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, brief(want), brief(got)))
			return
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			Diff(path+"."+k, w[k], g[k], out)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, brief(want), brief(got)))
			return
		}
		for i := range w {
			Diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], out)
		}
	default:
		if !reflect.DeepEqual(want, got) {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, brief(want), brief(got)))
		}
	}
}

func brief(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}
