package engine

import (
	"slices"
	"strings"
)

// Push tells one connection what to resend. Pushes to the same connection
// merge while they wait.
type Push struct {
	// Full means any subscribed type may have changed.
	Full bool
	// Types lists the type URLs to resend when Full is false.
	Types []string
	// Endpoints, when only EDS is pushed, names the clusters whose
	// ClusterLoadAssignments changed (the endpoint fast path); nil means all
	// subscribed ones.
	Endpoints []string
	// Reason is a short label for metrics and logs ("config", "endpoint", ...).
	Reason string
}

// Merge returns the push that covers both p and o, for a connection that had
// p pending when o arrived. Neither input is modified: their slices may be
// shared with other connections' pushes.
//
// Rules:
//   - Full wins: the merged push is Full with no Types or Endpoints.
//   - Types is the union, in first-seen order.
//   - Endpoints narrows an EDS-only push. It survives only when every input
//     that pushes EDS names its clusters and EDS is the only type pushed;
//     otherwise it is nil, which means all subscribed clusters.
//   - Reason lists the distinct reasons, comma separated, in first-seen order.
func (p Push) Merge(o Push) Push {
	m := Push{Full: p.Full || o.Full, Reason: mergeReason(p.Reason, o.Reason)}
	if m.Full {
		return m
	}
	m.Types = union(p.Types, o.Types)
	if len(m.Types) == 1 && m.Types[0] == TypeEndpoint {
		m.Endpoints = mergeEndpoints(p, o)
	}
	return m
}

// mergeEndpoints unions the cluster lists of two pushes that are both EDS-only
// (or empty). A nil list on a push that includes EDS means "all", and all wins.
func mergeEndpoints(p, o Push) []string {
	if (slices.Contains(p.Types, TypeEndpoint) && p.Endpoints == nil) ||
		(slices.Contains(o.Types, TypeEndpoint) && o.Endpoints == nil) {
		return nil
	}
	return union(p.Endpoints, o.Endpoints)
}

// union returns a followed by the elements of b not in a, without modifying
// a (Clip makes the first append copy). Short lists use a linear scan; long ones (a burst of endpoint changes
// merged per connection) a set, to stay linear.
func union(a, b []string) []string {
	out := slices.Clip(a)
	if len(a)*len(b) <= 256 {
		for _, e := range b {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
		return out
	}
	seen := make(map[string]struct{}, len(a)+len(b))
	for _, e := range a {
		seen[e] = struct{}{}
	}
	for _, e := range b {
		if _, ok := seen[e]; !ok {
			seen[e] = struct{}{}
			out = append(out, e)
		}
	}
	return out
}

// mergeReason joins distinct reasons so a burst of identical pushes keeps a
// short label ("endpoint") while a mixed one says so ("endpoint,config").
func mergeReason(a, b string) string {
	switch {
	case b == "" || a == b:
		return a
	case a == "":
		return b
	}
	for r := range strings.SplitSeq(a, ",") {
		if r == b {
			return a
		}
	}
	return a + "," + b
}
