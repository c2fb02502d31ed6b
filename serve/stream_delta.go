package serve

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// Delta (incremental) xDS:
//
//   - The stream tracks, per type, what the proxy holds: name → version hash,
//     seeded from initial_resource_versions on the first request of a type
//     (a reconnect), so resources the proxy already has are not resent.
//   - resource_names_subscribe / _unsubscribe change the subscription
//     whatever the nonce says; "*" toggles the wildcard, and an empty first
//     subscription to CDS or LDS is the legacy wildcard. Newly subscribed
//     names are answered at once; a subscribed name that does not exist is
//     reported in removed_resources (once), so the proxy does not wait for it.
//   - response_nonce and error_detail mean ACK or NACK exactly as in SotW;
//     after a NACK the proxy's rejected versions stay recorded, so the same
//     content is not resent and a later change is.
//   - A push sends only resources whose version differs from what the proxy
//     holds, and removed_resources for those that disappeared; a push with no
//     difference sends nothing.
//   - The first request of a type is always answered, even with nothing, so a
//     proxy's initialization never waits on an empty type.

// deltaType is one type URL's state on a Delta stream.
type deltaType struct {
	typeURL  string
	wildcard bool
	started  bool                // the first request was handled
	unknown  bool                // the engine does not serve this type
	nacked   bool                // the last response was rejected
	names    map[string]struct{} // explicit subscriptions, without "*"
	have     map[string]uint64   // what the proxy holds: name → versionHash; 0 = told absent
	nonce    uint64              // nonce of the last response
	version  uint64              // system_version_info of the last response
}

// deltaStream is the Delta protocol of one stream. Its slices and the seen
// set are scratch space reused by every response.
type deltaStream struct {
	*conn
	types   []*deltaType // ordered by typeRank, then first request
	seen    map[string]struct{}
	names   []string
	changed []engine.Resource
	removed []string
}

func newDelta(c *conn) protocol[*discoveryv3.DeltaDiscoveryRequest] {
	return &deltaStream{conn: c, seen: make(map[string]struct{})}
}

func (s *deltaStream) handle(req *discoveryv3.DeltaDiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		s.log.Debug("xds request without type_url ignored")
		return nil
	}
	t := s.state(typeURL)
	if nonce := req.GetResponseNonce(); nonce != "" {
		switch {
		case t.nonce == 0 || !nonceIs(nonce, t.nonce):
			// Stale: its ACK or NACK is outdated, but its subscription
			// changes below still apply.
			s.log.Debug("xds stale nonce", "type", typeURL, "nonce", nonce)
		case req.GetErrorDetail() != nil:
			s.nack(t, req.GetErrorDetail().GetMessage())
		default:
			t.nacked = false
			s.sess.Acked(typeURL, versionString(t.version))
		}
	}

	first := !t.started
	t.started = true
	if first {
		for name, v := range req.GetInitialResourceVersions() {
			t.have[name] = versionHash(v)
		}
		t.wildcard = len(req.GetResourceNamesSubscribe()) == 0 && wildcardType(typeURL)
	}
	if err := s.checkNames(typeURL, len(t.names)+len(req.GetResourceNamesSubscribe())); err != nil {
		return err
	}
	added, wildcardAdded := s.names[:0], false
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == "*" {
			wildcardAdded = wildcardAdded || !t.wildcard
			t.wildcard = true
		} else if _, ok := t.names[n]; !ok {
			t.names[n] = struct{}{}
			added = append(added, n)
		}
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		if n == "*" {
			t.wildcard = false
			maps.DeleteFunc(t.have, func(name string, _ uint64) bool { _, sub := t.names[name]; return !sub })
			continue
		}
		delete(t.names, n)
		if !t.wildcard {
			delete(t.have, n) // the proxy dropped it; a resubscription resends it
		}
	}
	s.names = added
	switch {
	case t.unknown:
		return nil
	case first || wildcardAdded:
		return s.respond(t, nil, first)
	case len(added) > 0:
		return s.respond(t, added, false)
	}
	return nil
}

func (s *deltaStream) push(p engine.Push) error {
	for _, t := range s.types {
		if !t.started || t.unknown || !pushes(&p, t.typeURL) {
			continue
		}
		if t.typeURL == engine.TypeEndpoint && !p.Full && p.Endpoints != nil {
			// The endpoint fast path: only the changed clusters this proxy
			// watches.
			names := s.names[:0]
			for _, n := range p.Endpoints {
				if _, ok := t.names[n]; ok || t.wildcard {
					names = append(names, n)
				}
			}
			s.names = names
			if len(names) > 0 {
				if err := s.respond(t, names, false); err != nil {
					return err
				}
			}
			continue
		}
		if err := s.respond(t, nil, false); err != nil {
			return err
		}
	}
	return nil
}

// respond generates t's resources and sends those the proxy does not hold at
// their current version, plus removals. With only == nil it covers t's whole
// subscription and removes anything the proxy holds that is gone; otherwise
// it covers exactly the names in only. It sends nothing when there is no
// difference, unless always is set.
func (s *deltaStream) respond(t *deltaType, only []string, always bool) error {
	names, wildcard := only, false
	if only == nil {
		names = s.sortedNames(t)
		wildcard = t.wildcard
	}
	var res []engine.Resource
	if wildcard || len(names) > 0 {
		var ok bool
		var err error
		if res, ok, err = s.generate(t.typeURL, names, wildcard); !ok {
			t.unknown = err == nil
			return err
		}
	}

	changed, removed := s.changed[:0], s.removed[:0]
	clear(s.seen)
	for i := range res {
		r := &res[i]
		s.seen[r.Name] = struct{}{}
		if t.have[r.Name] != versionHash(r.Version) {
			changed = append(changed, *r)
		}
	}
	// Removals: held resources that are gone, and subscribed names that
	// never existed and were not yet reported.
	if only == nil {
		for n, h := range t.have {
			if _, ok := s.seen[n]; !ok && h != 0 {
				removed = append(removed, n)
			}
		}
	}
	for _, n := range names {
		if _, ok := s.seen[n]; ok {
			continue
		}
		if h, held := t.have[n]; !held || (only != nil && h != 0) {
			removed = append(removed, n)
		}
	}
	slices.Sort(removed)
	removed = slices.Compact(removed)
	s.changed, s.removed = changed[:0], removed[:0]
	if len(changed) == 0 && len(removed) == 0 && !always {
		return nil
	}

	version := setDigest(changed)
	for _, n := range removed {
		version += resourceHash(n, "")
	}
	h := wireHeader{version: version, nonce: s.nextNonce(), typeURL: t.typeURL, controlPlane: s.srv.controlPlane}
	buf := getBuf(sizeDeltaDiscoveryResponse(&h, changed, removed))
	*buf = appendDeltaDiscoveryResponse(*buf, &h, changed, removed)
	if err := s.send(t.typeURL, h.version, buf); err != nil {
		return err
	}
	t.nonce, t.version = h.nonce, version
	for i := range changed {
		t.have[changed[i].Name] = versionHash(changed[i].Version)
	}
	for _, n := range removed {
		if _, sub := t.names[n]; sub {
			t.have[n] = 0 // remember it was reported absent
		} else {
			delete(t.have, n)
		}
	}
	clear(changed) // drop references to the engine's bytes until next use
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("xds delta response sent", "type", t.typeURL, "resources", len(changed),
			"removed", len(removed), "nonce", h.nonce)
	}
	return nil
}

// sortedNames returns t's explicit subscriptions, sorted, in the reused
// names scratch slice.
func (s *deltaStream) sortedNames(t *deltaType) []string {
	names := s.names[:0]
	for n := range t.names {
		names = append(names, n)
	}
	slices.Sort(names)
	s.names = names
	return names
}

func (s *deltaStream) nack(t *deltaType, msg string) {
	t.nacked = true
	version := versionString(t.version)
	s.srv.metrics.Rejected(t.typeURL)
	s.log.Warn("xds config rejected", "type", t.typeURL, "version", version, "err", msg)
	s.sess.Nacked(t.typeURL, version, msg)
}

// state returns t's state, creating it in push order on first use.
func (s *deltaStream) state(typeURL string) *deltaType {
	for _, t := range s.types {
		if t.typeURL == typeURL {
			return t
		}
	}
	t := &deltaType{typeURL: typeURL, names: map[string]struct{}{}, have: map[string]uint64{}}
	r := typeRank(typeURL)
	i := 0
	for i < len(s.types) && typeRank(s.types[i].typeURL) <= r {
		i++
	}
	s.types = slices.Insert(s.types, i, t)
	return t
}
