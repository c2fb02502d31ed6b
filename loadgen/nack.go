package loadgen

import "slices"

// NACKs (Config.NackRate). A proxy that NACKs a response keeps what it
// held, as Envoy keeps its last good config, and a server rightly does not
// resend what was rejected (pilotfish and istiod wait for the next change;
// go-control-plane resends in SotW). So a NACKed response counts as
// delivered: the proxy has been answered and chose to reject.
//
//   - Full config: a wildcard type is complete once a response of it was
//     ACKed or NACKed; a named type once every name it asked for is held
//     or came in a NACKed response (typeState.rejected). Envoy does the
//     same: a rejected CDS, LDS, EDS or RDS response ends that resource's
//     warming, and initialization moves on.
//   - Subscriptions follow only what was ACKed: a NACKed CDS response
//     subscribes to no new EDS services.
//   - A change has converged on a proxy that NACKed a response delivering
//     it (the expected resource in it; for !TYPE/NAME, a SotW CDS or LDS
//     response without it or a Delta removal of it), or, without an
//     expected resource, on a NACKed version bump, as on an ACKed one.
//
// Without this, a run with NACKs against pilotfish never ended: a proxy
// that NACKed its first CDS response waited forever for another.

// rejected records response r of st's type, just NACKed (NackRate): it
// answers the type and the names it carries, may deliver the current
// change, and may complete the proxy's config.
func (p *proxy) rejected(st *typeState, r *response) error {
	p.setNacked(r.t, true)
	if p.run.cfg.Mode == Delta || string(r.version) != st.version || !st.answered {
		p.bumps.Add(1)
	}
	st.answered = true
	if !st.wildcard {
		if names := p.namesOf(st, r); len(names) > 0 {
			st.rejected = unionIDs(st.rejected, names)
		}
	}
	if ch := p.run.change.Load(); ch != nil && ch.expect != nil && ch.expect.t == r.t && p.delivers(st, ch, r) {
		p.nackedChange = ch.index
	}
	if err := p.follow(r.t, false); err != nil {
		return err
	}
	p.check()
	return nil
}

// namesOf returns the sorted names of r's resources that st subscribes to.
func (p *proxy) namesOf(st *typeState, r *response) []uint32 {
	var names []uint32
	for i, e := range r.entries {
		if i > 0 && e.name == r.entries[i-1].name {
			continue // a resource's refs are adjacent
		}
		if _, ok := slices.BinarySearch(st.names, e.name); ok {
			names = append(names, e.name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// delivers reports whether NACKed response r carries change ch's expected
// state of ch.expect.t.
func (p *proxy) delivers(st *typeState, ch *changeState, r *response) bool {
	if !st.wildcard {
		if _, ok := slices.BinarySearch(st.names, ch.expectID); !ok {
			return false
		}
	}
	carries := slices.ContainsFunc(r.entries, func(e ref) bool { return e.name == ch.expectID })
	if !ch.expect.negate {
		return carries
	}
	if p.run.cfg.Mode == Delta {
		return slices.Contains(r.removed, ch.expectID)
	}
	// A SotW CDS or LDS response is the whole set (see apply).
	return (r.t == typeCDS || r.t == typeLDS) && !carries
}

// setNacked records whether the last response of type t was NACKed, and
// keeps the run's count of proxies with such a type (Sample.Nacking).
func (p *proxy) setNacked(t xtype, nacked bool) {
	was := p.nackedTypes != 0
	if nacked {
		p.nackedTypes |= 1 << t
	} else {
		p.nackedTypes &^= 1 << t
	}
	switch now := p.nackedTypes != 0; {
	case now && !was:
		p.run.nackingNow.Add(1)
	case !now && was:
		p.run.nackingNow.Add(-1)
	}
}

// clearNacked forgets the NACKed types, for a new stream.
func (p *proxy) clearNacked() {
	if p.nackedTypes != 0 {
		p.nackedTypes = 0
		p.run.nackingNow.Add(-1)
	}
}

// answeredAll reports whether every name of names is in have or rejected
// (all sorted).
func answeredAll(have []ref, rejected, names []uint32) bool {
	i, j := 0, 0
	for _, n := range names {
		for i < len(have) && have[i].name < n {
			i++
		}
		if i < len(have) && have[i].name == n {
			continue
		}
		for j < len(rejected) && rejected[j] < n {
			j++
		}
		if j == len(rejected) || rejected[j] != n {
			return false
		}
	}
	return true
}

// keepIDs drops from ids (in place) the names not in names (both sorted).
func keepIDs(ids, names []uint32) []uint32 {
	if len(ids) == 0 {
		return ids
	}
	out := ids[:0]
	for _, id := range ids {
		if _, ok := slices.BinarySearch(names, id); ok {
			out = append(out, id)
		}
	}
	return out
}

// dropIDs drops from ids (in place) the names in removed (sorted).
func dropIDs(ids, removed []uint32) []uint32 {
	if len(ids) == 0 {
		return ids
	}
	out := ids[:0]
	for _, id := range ids {
		if _, ok := slices.BinarySearch(removed, id); !ok {
			out = append(out, id)
		}
	}
	return out
}
