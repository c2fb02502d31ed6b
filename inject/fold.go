package inject

import (
	"bytes"
	"fmt"
	"strconv"
	"text/template"
	"text/template/parse"
)

// Templates are folded once per Settings: every action, if and with
// whose value depends only on the settings (.Values, .MeshConfig,
// .Revision, ... and pure functions of them) is evaluated and replaced by
// its output or by the branch it selects. What is left reads the pod. The
// chart's sidecar template then does about half the work per pod (most
// of its conditions test .Values), with output equal byte for byte
// (TestFoldedTemplatesRenderTheSame).

// settingsFields are the TemplateData fields a Settings fixes.
var settingsFields = map[string]bool{
	"Values": true, "MeshConfig": true, "Revision": true, "NativeSidecars": true,
	"ProxyUID": true, "ProxyGID": true, "InboundTrafficPolicyMode": true, "CompliancePolicy": true,
}

// pureFuncs are the template functions whose result depends on their
// arguments only: neither time, randomness, the environment, map order
// nor mutation of an argument (sprig's set, unset, merge*). Only they are
// folded.
var pureFuncs = map[string]bool{
	// text/template's own (not call)
	"and": true, "or": true, "not": true, "len": true, "index": true, "slice": true, "print": true,
	"printf": true, "println": true, "eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
	"html": true, "js": true, "urlquery": true,
	// sprig's
	"default": true, "empty": true, "coalesce": true, "ternary": true, "quote": true, "squote": true,
	"cat": true, "nindent": true, "replace": true, "trim": true, "trimAll": true, "trimSuffix": true,
	"trimPrefix": true, "trunc": true, "upper": true, "lower": true, "title": true, "toString": true,
	"toStrings": true, "join": true, "split": true, "splitList": true, "hasPrefix": true,
	"hasSuffix": true, "list": true, "append": true, "dict": true, "get": true, "hasKey": true,
	"toJson": true, "toPrettyJson": true, "toRawJson": true, "fromJson": true, "atoi": true,
	"int": true, "int64": true, "float64": true, "add": true, "sub": true, "mul": true, "div": true,
	"mod": true, "max": true, "min": true, "b64enc": true, "kindIs": true, "typeOf": true,
	"typeIs": true, "required": true, "repeat": true, "substr": true, "first": true, "last": true,
	"has": true, "compact": true, "uniq": true, "without": true, "deepCopy": true,
	// istiod's (not env: the process environment)
	"formatDuration": true, "isset": true, "excludeInboundPort": true, "includeInboundPorts": true,
	"kubevirtInterfaces": true, "excludeInterfaces": true, "applicationPorts": true,
	"annotation": true, "valueOrDefault": true, "toJSON": true, "fromJSON": true,
	"structToJSON": true, "protoToJSON": true, "toYaml": true, "indent": true, "directory": true,
	"contains": true, "toLower": true, "appendMultusNetwork": true, "omit": true, "strdict": true,
	"toJsonMap": true, "mergeMaps": true, "omitNil": true, "otelResourceAttributes": true,
}

// folder folds one template (with the templates it defines) over the
// settings' part of the data.
type folder struct {
	data *TemplateData // settings fields set, the pod's zero
	eval *template.Template
	// captured is the value foldCapture last received, ok whether it ran.
	captured   any
	capturedOK bool
	// rootDot are the defined templates every {{template}} call passes
	// the root data as dot (so $ and . are the root there too).
	rootDot map[string]bool
	buf     bytes.Buffer
}

// foldTemplate returns t folded over data's settings fields; t is not
// modified. A pipeline that fails to evaluate is left as it is (it fails
// the same way per pod).
func foldTemplate(t *template.Template, data *TemplateData) (*template.Template, error) {
	f := &folder{data: data}
	f.eval = template.New("fold").Funcs(templateFuncs).Funcs(template.FuncMap{
		captureFunc: func(v any) string { f.captured, f.capturedOK = v, true; return "" },
	})
	f.rootDot = rootDotTemplates(t)
	out := template.New(t.Name()).Funcs(templateFuncs)
	for _, d := range t.Templates() {
		if d.Tree == nil {
			continue
		}
		tree := d.Tree.Copy()
		root := d.Name() == t.Name() || f.rootDot[d.Name()]
		f.list(tree.Root, root, root)
		if _, err := out.AddParseTree(d.Name(), tree); err != nil {
			return nil, err
		}
	}
	return out.Lookup(t.Name()), nil
}

// rootDotTemplates finds the defined templates only ever called with the
// root data (`{{template "x" .}}` where dot is the root).
func rootDotTemplates(t *template.Template) map[string]bool {
	cand := map[string]bool{}
	for _, d := range t.Templates() {
		if d.Name() != t.Name() && d.Tree != nil {
			cand[d.Name()] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, d := range t.Templates() {
			if d.Tree == nil {
				continue
			}
			root := d.Name() == t.Name() || cand[d.Name()]
			walkCalls(d.Tree.Root, root, func(name string, rootDot bool) {
				if !rootDot && cand[name] {
					delete(cand, name)
					changed = true
				}
			})
		}
	}
	return cand
}

// walkCalls reports each {{template}} call under n, and whether it passes
// the root data.
func walkCalls(n parse.Node, root bool, call func(name string, rootDot bool)) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			walkCalls(c, root, call)
		}
	case *parse.TemplateNode:
		call(x.Name, root && isDotPipe(x.Pipe))
	case *parse.IfNode:
		walkCalls(x.List, root, call)
		walkCalls(x.ElseList, root, call)
	case *parse.WithNode:
		walkCalls(x.List, false, call)
		walkCalls(x.ElseList, root, call)
	case *parse.RangeNode:
		walkCalls(x.List, false, call)
		walkCalls(x.ElseList, root, call)
	}
}

func isDotPipe(p *parse.PipeNode) bool {
	if p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	_, ok := p.Cmds[0].Args[0].(*parse.DotNode)
	return ok
}

// list folds l in place. root: dot is the root data here; dollar: $ is.
func (f *folder) list(l *parse.ListNode, root, dollar bool) {
	if l == nil {
		return
	}
	for i, n := range l.Nodes {
		l.Nodes[i] = f.node(n, root, dollar)
	}
}

func (f *folder) node(n parse.Node, root, dollar bool) parse.Node {
	switch x := n.(type) {
	case *parse.ListNode:
		f.list(x, root, dollar)
	case *parse.ActionNode:
		if len(x.Pipe.Decl) == 0 && f.constPipe(x.Pipe, root, dollar) {
			if out, ok := f.run(x); ok {
				return &parse.TextNode{NodeType: parse.NodeText, Pos: x.Pos, Text: []byte(out)}
			}
		}
		f.args(x.Pipe, root, dollar)
	case *parse.IfNode:
		if truth, ok := f.condition(x.Pipe, root, dollar); ok {
			return f.branch(x.List, x.ElseList, truth, root, dollar)
		}
		f.args(x.Pipe, root, dollar)
		f.list(x.List, root, dollar)
		f.list(x.ElseList, root, dollar)
	case *parse.WithNode:
		if f.constPipe(x.Pipe, root, dollar) {
			if truth, ok := f.truth(x.Pipe); ok && !truth {
				return f.branch(x.List, x.ElseList, false, root, dollar)
			}
		}
		f.args(x.Pipe, root, dollar)
		f.list(x.List, false, dollar)
		f.list(x.ElseList, root, dollar)
	case *parse.RangeNode:
		f.args(x.Pipe, root, dollar)
		f.list(x.List, false, dollar)
		f.list(x.ElseList, root, dollar)
	}
	return n
}

// condition is an if's truth when the settings decide it: its pipeline
// is constant, or it is an and (or) whose constant operands come first
// and one of them is false (true). Otherwise the constant operands that
// cannot change its truth are dropped (true ones from an and, false ones
// from an or), and ok is false.
func (f *folder) condition(p *parse.PipeNode, root, dollar bool) (truth, ok bool) {
	if f.constPipe(p, root, dollar) {
		return f.truth(p)
	}
	if len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) < 3 {
		return false, false
	}
	cmd := p.Cmds[0]
	fn, _ := cmd.Args[0].(*parse.IdentifierNode)
	if fn == nil || (fn.Ident != "and" && fn.Ident != "or") {
		return false, false
	}
	decides := fn.Ident == "or" // the operand truth that decides the whole
	kept := []parse.Node{fn}
	leading := true // every operand so far is constant
	for _, a := range cmd.Args[1:] {
		if !f.constArg(a, root, dollar) {
			leading = false
			kept = append(kept, a)
			continue
		}
		t, ok := f.truth(&parse.PipeNode{NodeType: parse.NodePipe, Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Args: []parse.Node{a}}}})
		switch {
		case !ok:
			kept = append(kept, a)
		case t == decides && leading:
			return decides, true
		case t == decides:
			kept = append(kept, a) // decides, but only once the operands before it are evaluated
		}
	}
	if len(kept) > 1 {
		cmd.Args = kept
	}
	return false, false
}

// captureFunc receives a value in the fold's own evaluations.
const captureFunc = "foldCapture"

// args replaces the constant operands of p's commands whose value is a
// string or a bool by that literal (a function's operands, or a command
// that is one operand alone): the pod's evaluation no longer walks
// .Values for them.
func (f *folder) args(p *parse.PipeNode, root, dollar bool) {
	for _, c := range p.Cmds {
		first := 0
		if _, fn := c.Args[0].(*parse.IdentifierNode); fn {
			first = 1
		} else if len(c.Args) > 1 {
			continue // a method with arguments
		}
		for i := first; i < len(c.Args); i++ {
			switch a := c.Args[i].(type) {
			case *parse.FieldNode, *parse.VariableNode, *parse.ChainNode, *parse.PipeNode:
				if f.constArg(a, root, dollar) {
					// annotation prints its default (fmt.Sprint): any
					// value folds, as the text it prints.
					printed := i == 3 && isIdent(c.Args[0], "annotation")
					if lit := f.literal(a, printed); lit != nil {
						c.Args[i] = lit
					}
				} else if pn, ok := a.(*parse.PipeNode); ok {
					f.args(pn, root, dollar)
				}
			}
		}
	}
}

func isIdent(n parse.Node, name string) bool {
	id, ok := n.(*parse.IdentifierNode)
	return ok && id.Ident == name
}

// literal is a's value as a string or bool node (printed: any value, as
// fmt.Sprint prints it); nil for other values or when it fails.
func (f *folder) literal(a parse.Node, printed bool) parse.Node {
	f.captured, f.capturedOK = nil, false
	capture := &parse.ActionNode{NodeType: parse.NodeAction, Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Cmds: []*parse.CommandNode{
		{NodeType: parse.NodeCommand, Args: []parse.Node{a}},
		{NodeType: parse.NodeCommand, Args: []parse.Node{&parse.IdentifierNode{NodeType: parse.NodeIdentifier, Ident: captureFunc}}},
	}}}
	if _, ok := f.run(capture); !ok || !f.capturedOK {
		return nil
	}
	if printed {
		v := fmt.Sprint(f.captured)
		return &parse.StringNode{NodeType: parse.NodeString, Quoted: strconv.Quote(v), Text: v}
	}
	switch v := f.captured.(type) {
	case string:
		return &parse.StringNode{NodeType: parse.NodeString, Quoted: strconv.Quote(v), Text: v}
	case bool:
		return &parse.BoolNode{NodeType: parse.NodeBool, True: v}
	}
	return nil
}

// branch is the list an if (or with) selects, folded. It runs inline
// unless it declares variables, which must stay scoped to it: then it
// keeps an {{if true}} around it.
func (f *folder) branch(then, els *parse.ListNode, truth bool, root, dollar bool) parse.Node {
	l := els
	if truth {
		l = then
	}
	if l == nil {
		return &parse.TextNode{NodeType: parse.NodeText}
	}
	f.list(l, root, dollar)
	for _, n := range l.Nodes {
		if a, ok := n.(*parse.ActionNode); ok && len(a.Pipe.Decl) > 0 && !a.Pipe.IsAssign {
			return &parse.IfNode{BranchNode: parse.BranchNode{NodeType: parse.NodeIf, Pos: l.Pos, List: l,
				Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: l.Pos, Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand,
					Pos: l.Pos, Args: []parse.Node{&parse.BoolNode{NodeType: parse.NodeBool, Pos: l.Pos, True: true}}}}}}}
		}
	}
	return l
}

// constPipe: p declares nothing and reads only settings fields, literals
// and pure functions.
func (f *folder) constPipe(p *parse.PipeNode, root, dollar bool) bool {
	if p == nil || len(p.Decl) > 0 {
		return false
	}
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			if !f.constArg(a, root, dollar) {
				return false
			}
		}
	}
	return true
}

func (f *folder) constArg(n parse.Node, root, dollar bool) bool {
	switch x := n.(type) {
	case *parse.IdentifierNode:
		return pureFuncs[x.Ident]
	case *parse.FieldNode:
		return root && settingsFields[x.Ident[0]]
	case *parse.VariableNode:
		return dollar && x.Ident[0] == "$" && len(x.Ident) > 1 && settingsFields[x.Ident[1]]
	case *parse.ChainNode:
		return f.constArg(x.Node, root, dollar)
	case *parse.PipeNode:
		return f.constPipe(x, root, dollar)
	case *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
		return true
	}
	return false
}

// run executes node (a copy) over the settings' data; ok is false when it
// fails. Nodes made here have position 0: an error's context is read
// from the text of the node's tree, and they have none.
func (f *folder) run(node parse.Node) (string, bool) {
	tree := &parse.Tree{Name: "fold", Root: &parse.ListNode{NodeType: parse.NodeList, Nodes: []parse.Node{node.Copy()}}}
	t, err := f.eval.AddParseTree("fold", tree)
	if err != nil {
		return "", false
	}
	f.buf.Reset()
	if err := t.Execute(&f.buf, f.data); err != nil {
		return "", false
	}
	return f.buf.String(), true
}

// truth is whether an if of p takes its first branch (as a with would).
func (f *folder) truth(p *parse.PipeNode) (bool, bool) {
	one := &parse.ListNode{NodeType: parse.NodeList, Nodes: []parse.Node{&parse.TextNode{NodeType: parse.NodeText, Text: []byte("1")}}}
	out, ok := f.run(&parse.IfNode{BranchNode: parse.BranchNode{NodeType: parse.NodeIf, Pipe: p, List: one}})
	return out == "1", ok
}
