package ingest

import (
	telemetry "istio.io/api/telemetry/v1alpha1"
)

// telemetry validates a Telemetry as istiod's ValidateTelemetry does: one
// of selector and targetRefs, named providers, tracing's sampling range
// and custom tags, metrics' tag overrides, and access logging filters
// (istiod parses them as CEL; pilotfish checks that the expression is set
// and its brackets and quotes balance, celBalanced).
func (v *validator) telemetry(p *fieldPath, t *telemetry.Telemetry) {
	v.policyTarget(p, t.GetSelector(), t.GetTargetRef(), t.GetTargetRefs())
	for i, m := range t.GetMetrics() {
		mp := p.f("metrics").i(i)
		v.telemetryProviders(mp, m.GetProviders())
		for j, o := range m.GetOverrides() {
			op := mp.f("overrides").i(j)
			if o == nil {
				v.errorf(op, "must not be null")
				continue
			}
			for name, to := range o.GetTagOverrides() {
				tp := op.f("tagOverrides").f(name)
				switch {
				case to == nil:
					v.errorf(tp, "must not be null")
				case to.GetOperation() == telemetry.MetricsOverrides_TagOverride_UPSERT && to.GetValue() == "":
					v.errorf(tp.f("value"), "required when operation is UPSERT")
				case to.GetOperation() == telemetry.MetricsOverrides_TagOverride_REMOVE && to.GetValue() != "":
					v.errorf(tp.f("value"), "may only be set when operation is UPSERT")
				}
			}
			if cm, ok := o.GetMatch().GetMetricMatch().(*telemetry.MetricSelector_CustomMetric); ok && cm.CustomMetric == "" {
				v.errorf(op.f("match").f("customMetric"), "must not be empty")
			}
		}
	}
	for i, l := range t.GetAccessLogging() {
		lp := p.f("accessLogging").i(i)
		v.telemetryProviders(lp, l.GetProviders())
		if f := l.GetFilter(); f != nil && !celBalanced(f.GetExpression()) {
			v.errorf(lp.f("filter").f("expression"), "must be a valid CEL expression: %q is empty or its brackets or quotes do not balance", f.GetExpression())
		}
	}
	for i, tr := range t.GetTracing() {
		tp := p.f("tracing").i(i)
		v.telemetryProviders(tp, tr.GetProviders())
		if s := tr.GetRandomSamplingPercentage(); s != nil && (s.GetValue() < 0 || s.GetValue() > 100) {
			v.errorf(tp.f("randomSamplingPercentage"), "must be in range [0.0, 100.0]")
		}
		for name, tag := range tr.GetCustomTags() {
			cp := tp.f("customTags").f(name)
			if name == "" {
				v.errorf(cp, "tag name must not be empty")
			}
			switch x := tag.GetType().(type) {
			case nil:
				v.errorf(cp, "must not be null")
			case *telemetry.Tracing_CustomTag_Literal:
				if x.Literal.GetValue() == "" {
					v.errorf(cp.f("literal").f("value"), "must not be empty")
				}
			case *telemetry.Tracing_CustomTag_Header:
				if x.Header.GetName() == "" {
					v.errorf(cp.f("header").f("name"), "must not be empty")
				}
			case *telemetry.Tracing_CustomTag_Environment:
				if x.Environment.GetName() == "" {
					v.errorf(cp.f("environment").f("name"), "must not be empty")
				}
			}
		}
	}
}

func (v *validator) telemetryProviders(p *fieldPath, providers []*telemetry.ProviderRef) {
	for i, r := range providers {
		if r.GetName() == "" {
			v.errorf(p.f("providers").i(i).f("name"), "required")
		}
	}
}

// celBalanced is a syntactic check of a CEL expression short of parsing
// it (pilotfish does not link cel-go): not blank, quotes closed, and
// brackets balanced outside them.
func celBalanced(expr string) bool {
	var stack []byte
	var quote byte
	blank := true
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c != ' ' && c != '\t' && c != '\n' {
			blank = false
		}
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, c)
		case c == ')' || c == ']' || c == '}':
			open := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return !blank && quote == 0 && len(stack) == 0
}
