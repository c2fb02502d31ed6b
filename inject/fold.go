package inject

import (
	"bytes"
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
	// rootDot are the defined templates every {{template}} call passes
	// the root data as dot (so $ and . are the root there too).
	rootDot map[string]bool
	buf     bytes.Buffer
}

// foldTemplate returns t folded over data's settings fields; t is not
// modified. A pipeline that fails to evaluate is left as it is (it fails
// the same way per pod).
func foldTemplate(t *template.Template, data *TemplateData) (*template.Template, error) {
	f := &folder{data: data, eval: template.New("fold").Funcs(templateFuncs)}
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
	case *parse.IfNode:
		if f.constPipe(x.Pipe, root, dollar) {
			if truth, ok := f.truth(&parse.IfNode{BranchNode: parse.BranchNode{NodeType: parse.NodeIf, Pipe: x.Pipe}}); ok {
				return f.branch(x.List, x.ElseList, truth, root, dollar)
			}
		}
		f.list(x.List, root, dollar)
		f.list(x.ElseList, root, dollar)
	case *parse.WithNode:
		if f.constPipe(x.Pipe, root, dollar) {
			if truth, ok := f.truth(&parse.WithNode{BranchNode: parse.BranchNode{NodeType: parse.NodeWith, Pipe: x.Pipe}}); ok && !truth {
				return f.branch(x.List, x.ElseList, false, root, dollar)
			}
		}
		f.list(x.List, false, dollar)
		f.list(x.ElseList, root, dollar)
	case *parse.RangeNode:
		f.list(x.List, false, dollar)
		f.list(x.ElseList, root, dollar)
	}
	return n
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

// truth runs an if or with node whose branches are empty, with "1" as its
// then branch.
func (f *folder) truth(b parse.Node) (bool, bool) {
	one := &parse.ListNode{NodeType: parse.NodeList, Nodes: []parse.Node{&parse.TextNode{NodeType: parse.NodeText, Text: []byte("1")}}}
	switch x := b.(type) {
	case *parse.IfNode:
		x.List = one
	case *parse.WithNode:
		x.List = one
	}
	out, ok := f.run(b)
	return out == "1", ok
}
