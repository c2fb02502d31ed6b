package serve

import (
	"context"
	"log/slog"
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

// deltaType is one type URL's state on a Delta stream. Both sets are
// shared and immutable: a change replaces them (see delta_held.go and
// delta_transition.go), so a connected proxy costs a few pointers per type.
//
// A type's state is kept only once it was answered: a type the engine does
// not serve and istiod leaves unanswered leaves nothing on the stream; one
// istiod answers with an empty set is kept as any answered type
// (unknown_types.go).
type deltaType struct {
	typeURL  string
	wildcard bool
	started  bool     // the first request was handled
	unknown  bool     // the engine does not serve this type and it is left unanswered (the first request learns it)
	empty    bool     // the engine does not serve this type: answered with an empty set, never pushed (unknown_types.go)
	nacked   bool     // the last response was rejected
	subs     []string // explicit subscriptions, sorted, without "*" (shared)
	subsHash uint64   // hashNames(subs)
	subsLen  int      // namesBytes(subs)
	held     *heldSet // what the proxy holds
	nonce    uint64   // nonce of the last response
	nackedAt uint64   // nonce of the last response rejected (each is counted once)
	version  uint64   // system_version_info of the last response
	// The last transition and subscription change the stream took: held so
	// that the tables sharing them keep them while the streams of a class
	// take them (delta_transition.go).
	tr  *respondResult
	sub *subscribeResult
}

// subscribed reports whether name is an explicit subscription.
func (t *deltaType) subscribed(name string) bool {
	_, ok := slices.BinarySearch(t.subs, name)
	return ok
}

// deltaStream is the Delta protocol of one stream. names is scratch space
// reused by every push.
type deltaStream struct {
	*conn
	types []*deltaType // ordered by typeRank, then first request
	names []string
}

func newDelta(c *conn) protocol[*discoveryv3.DeltaDiscoveryRequest] {
	return &deltaStream{conn: c}
}

func (s *deltaStream) handle(req *discoveryv3.DeltaDiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		s.log.Debug("xds request without type_url ignored")
		return nil
	}
	if err := checkTypeURL(typeURL); err != nil { // input_limits.go
		return err
	}
	t := s.lookup(typeURL)
	if t == nil {
		if len(s.types) >= maxTypesPerStream {
			return errTooManyTypes
		}
		t = &deltaType{typeURL: typeURL, held: emptyHeld, subsHash: hashNames(nil)}
		if err := s.handleType(t, req); err != nil || t.unknown {
			return err // an unknown type keeps nothing
		}
		s.insert(t)
		return nil
	}
	return s.handleType(t, req)
}

// handleType handles a request for t's type.
func (s *deltaStream) handleType(t *deltaType, req *discoveryv3.DeltaDiscoveryRequest) error {
	typeURL := t.typeURL
	if nonce := req.GetResponseNonce(); nonce != "" {
		switch {
		case t.nonce == 0 || !nonceIs(nonce, t.nonce):
			// Stale: its ACK or NACK is outdated, but its subscription
			// changes below still apply.
			s.log.Debug("xds stale nonce", "type", typeURL, "nonce", clip(nonce, clipShort))
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
		if v := req.GetInitialResourceVersions(); len(v) > 0 {
			if err := s.checkNames(typeURL, len(v)); err != nil {
				return err
			}
			n := 0
			for name := range v {
				n += len(name)
			}
			if err := checkSubscribedBytes(typeURL, n); err != nil {
				return err
			}
			m := make(map[string]uint64, len(v))
			for name, version := range v {
				m[name] = versionHash(version)
			}
			t.held = canonicalHeld(m)
		}
		t.wildcard = len(req.GetResourceNamesSubscribe()) == 0 && wildcardType(typeURL)
	}
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if err := s.checkNames(typeURL, len(t.subs)+len(sub)); err != nil {
		return err
	}
	if err := checkSubscribedBytes(typeURL, t.subsLen+namesBytes(sub)); err != nil {
		return err
	}
	var added []string
	wildcardAdded := false
	if len(sub) > 0 || len(unsub) > 0 {
		added, wildcardAdded = s.resubscribe(t, sub, unsub)
	}
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
		if !t.started || t.unknown || t.empty || !pushes(&p, t.typeURL) {
			continue
		}
		if t.typeURL == engine.TypeEndpoint && !p.Full && p.Endpoints != nil {
			// The endpoint fast path: only the changed clusters this proxy
			// watches.
			names := s.names[:0]
			for _, n := range p.Endpoints {
				if t.wildcard || t.subscribed(n) {
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
// difference, unless always is set. The difference is a shared transition
// (delta_transition.go): computed by the first stream in this state.
func (s *deltaStream) respond(t *deltaType, only []string, always bool) error {
	names, wildcard := only, false
	if only == nil {
		names = t.subs
		wildcard = t.wildcard
	}
	var res []engine.Resource
	if !t.empty && (wildcard || len(names) > 0 || always) { // the first response also learns whether the type is served
		var a answer
		var err error
		if res, a, err = s.generate(t.typeURL, names, wildcard); a == answerNone {
			t.unknown = err == nil
			return err
		}
		t.empty = a == answerEmpty
	}
	k := respondKey{
		typeURL: t.typeURL, held: t.held, subs: t.subsHash, nsubs: len(t.subs),
		res: setDigest(res), nres: len(res), partial: only != nil, wildcard: wildcard, always: always,
	}
	if only != nil {
		k.only, k.nonly = hashNames(only), len(only)
	}
	tr := s.srv.deltaTransitions.get(k, t.subs, only, func() *respondResult {
		return computeRespond(t.typeURL, t.held, t.subs, only, res, always)
	})
	s.releaseScratch() // res is no longer needed: an idle stream holds no resource list
	t.tr = tr          // kept shared while this stream holds it
	if tr.body == nil {
		return nil
	}
	nonce := s.nextNonce()
	h := wireHeader{nonce: nonce, controlPlane: s.srv.controlPlane}
	tail := getBuf(sizeDeltaTail(&h, tr.removedNames))
	*tail = appendDeltaTail((*tail)[:0], &h, tr.removedNames)
	if err := s.sendShared(t.typeURL, tr.version, tr.body, tail); err != nil {
		return err
	}
	t.nonce, t.version, t.held = nonce, tr.version, tr.held
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("xds delta response sent", "type", t.typeURL, "resources", tr.changed,
			"removed", tr.removed, "nonce", nonce)
	}
	return nil
}

// resubscribe applies a request's subscribe and unsubscribe lists to t and
// returns the names newly subscribed and whether the wildcard was turned
// on. A resource the proxy unsubscribes from is forgotten (a resubscription
// resends it) unless the wildcard still delivers it. Proxies of a class
// make the same change (a new cluster's EDS name, after a config change),
// so the new list is a shared transition too.
func (s *deltaStream) resubscribe(t *deltaType, sub, unsub []string) (added []string, wildcardAdded bool) {
	k := subscribeKey{
		typeURL: t.typeURL, subs: t.subsHash, nsubs: len(t.subs), wildcard: t.wildcard,
		sub: hashNames(sub), nsub: len(sub), unsub: hashNames(unsub), nunsub: len(unsub),
	}
	r := s.srv.deltaTransitions.subscription(k, t.subs, sub, unsub, func() *subscribeResult {
		return computeSubscribe(t.subs, t.wildcard, sub, unsub)
	})
	t.sub = r // kept shared while this stream holds it
	if r.subs != nil {
		t.subs, t.subsHash, t.subsLen = r.subs, r.subsHash, r.subsBytes
	}
	t.wildcard = r.wildcard
	if len(r.dropped) > 0 {
		t.held = t.held.without(r.dropped)
	}
	if r.wildcardDropped {
		t.held = t.held.filter(t.subscribed)
	}
	return r.added, r.wildcardAdded
}

// nack records a rejection of the last response: logged, counted and
// reported once per nonce, however often the proxy repeats it.
func (s *deltaStream) nack(t *deltaType, msg string) {
	if t.nacked && t.nackedAt == t.nonce {
		s.log.Debug("xds repeated rejection ignored", "type", t.typeURL, "nonce", t.nonce)
		return
	}
	t.nacked, t.nackedAt = true, t.nonce
	version := versionString(t.version)
	msg = keepClipped(msg, clipMessage)
	s.srv.metrics.Rejected(t.typeURL)
	s.log.Warn("xds config rejected", "type", t.typeURL, "version", version, "nonce", t.nonce, "err", msg)
	s.sess.Nacked(t.typeURL, version, msg)
}

// lookup returns typeURL's state, nil before its first request was
// answered.
func (s *deltaStream) lookup(typeURL string) *deltaType {
	for _, t := range s.types {
		if t.typeURL == typeURL {
			return t
		}
	}
	return nil
}

// insert adds t to the stream's types in push order.
func (s *deltaStream) insert(t *deltaType) {
	r := typeRank(t.typeURL)
	i := 0
	for i < len(s.types) && typeRank(s.types[i].typeURL) <= r {
		i++
	}
	s.types = slices.Insert(s.types, i, t)
}
