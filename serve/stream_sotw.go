package serve

import (
	"context"
	"hash/maphash"
	"log/slog"
	"slices"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// State of the World, as Envoy and istiod speak it:
//
//   - Every response carries the complete set for its type: all resources for
//     a wildcard subscription (CDS and LDS with no names, or an explicit "*"),
//     otherwise the subscribed names that exist. version_info is a digest of
//     the set's (name, version) pairs, identical on every stream and replica.
//   - A request whose response_nonce is not the last nonce sent for its type
//     is stale and ignored: a newer response is already on its way.
//   - An ACK (current nonce, no error_detail) records the version; if it also
//     changes the subscribed names, the new set is sent.
//   - A NACK (current nonce, error_detail) is logged, counted and reported to
//     the session, and never answered: resending the same bytes would loop.
//     Only content that differs from what was rejected is pushed later.
//   - A request without a nonce, or the first one for a type on this stream
//     (a reconnect may carry another server's nonce), is answered at once.
//   - A push regenerates the types it covers in CDS, EDS, LDS, RDS order and
//     sends only those whose digest differs from the last one sent.
//
// Per type the stream keeps the subscribed names and three integers; it never
// keeps per-resource versions, since the set digest decides "changed".

// sotwType is one type URL's state on a SotW stream. A type's state is
// kept only once a response of it was sent: a type the engine does not
// serve and istiod leaves unanswered leaves nothing on the stream; one
// istiod answers with an empty set is kept as any answered type
// (unknown_types.go).
type sotwType struct {
	typeURL  string
	names    []string // explicit subscriptions, sorted, unique, without "*"
	wildcard bool
	named    bool   // names were sent once: no more legacy wildcard
	sent     bool   // a response went out for this type
	nacked   bool   // the last response was rejected
	digest   uint64 // the set the proxy holds once it accepts the last response
	version  uint64 // version_info of the last response
	nonce    uint64 // nonce of the last response
	nackedAt uint64 // nonce of the last response rejected (each is counted once)
	partial  bool   // the last response was a partial EDS update
	empty    bool   // the engine does not serve the type: answered with an empty set, never pushed (unknown_types.go)
	// rawNames is a digest of the last request's resource_names as sent:
	// Envoy repeats its whole subscription in every ACK (a thousand names
	// for EDS in a large mesh), so an unchanged list is recognised without
	// sorting it.
	rawNames uint64
	rawSeen  bool
	// What the stream holds so that the tables sharing them among streams
	// keep them (weak_table.go): the last body sent, the sorted entry of
	// the subscription, the last added set.
	body   []byte
	sorted *sortedNames
	added  *addedSet
}

// sotwStream is the SotW protocol of one stream.
type sotwStream struct {
	*conn
	types []*sotwType // ordered by typeRank, then first request
}

func newSotW(c *conn) protocol[*discoveryv3.DiscoveryRequest] {
	return &sotwStream{conn: c}
}

func (s *sotwStream) handle(req *discoveryv3.DiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		s.log.Debug("xds request without type_url ignored")
		return nil
	}
	if err := checkTypeURL(typeURL); err != nil { // input_limits.go
		return err
	}
	if isDebugType(typeURL) {
		return s.debugRequest(req) // debug_types.go
	}
	if err := s.checkNames(typeURL, len(req.GetResourceNames())); err != nil {
		return err
	}
	t := s.lookup(typeURL)
	if t == nil {
		// The first request of the type. Its state is kept only once it
		// was answered: an unknown type left unanswered (as istiod does,
		// unknown_types.go) keeps nothing, so a flood of them costs no
		// memory.
		if len(s.types) >= maxTypesPerStream {
			return errTooManyTypes
		}
		if req.GetErrorDetail() != nil {
			s.log.Debug("xds initial request carries a rejection", "type", typeURL,
				"err", clip(req.GetErrorDetail().GetMessage(), clipShort))
		}
		t = &sotwType{typeURL: typeURL}
		t.setNames(req.GetResourceNames())
		if err := s.respond(t, true); err != nil || !t.sent {
			return err
		}
		s.insert(t)
		return nil
	}
	if req.GetResponseNonce() != "" {
		if !nonceIs(req.GetResponseNonce(), t.nonce) {
			s.log.Debug("xds stale request ignored", "type", typeURL, "nonce", clip(req.GetResponseNonce(), clipShort))
			return nil
		}
		if req.GetErrorDetail() != nil {
			s.nack(t, req)
			return nil
		}
		wasNacked := t.nacked
		t.nacked = false
		// The version the proxy accepted is the one sent with this nonce:
		// a request's version_info that says otherwise is not kept.
		version := req.GetVersionInfo() // the decoder's own copy
		if !versionIs(version, t.version) {
			version = versionString(t.version)
		}
		s.sess.Acked(typeURL, version)
		before := t.names
		if !t.setNames(req.GetResourceNames()) {
			return nil
		}
		if t.typeURL == engine.TypeEndpoint && !t.wildcard && !t.partial && !wasNacked {
			return s.respondAdded(t, before)
		}
		return s.respond(t, true)
	}
	if req.GetErrorDetail() != nil {
		// A reconnecting proxy reporting a rejection by another server.
		s.log.Debug("xds request without nonce carries a rejection", "type", typeURL,
			"err", clip(req.GetErrorDetail().GetMessage(), clipShort))
	}
	t.setNames(req.GetResourceNames())
	return s.respond(t, true)
}

func (s *sotwStream) push(p engine.Push) error {
	for _, t := range s.types {
		if !t.sent || t.empty || !pushes(&p, t.typeURL) {
			continue
		}
		if t.typeURL == engine.TypeEndpoint && !p.Full && p.Endpoints != nil && !t.wildcard {
			// The endpoint fast path. EDS is not a full-state type in SotW:
			// a response may carry just the assignments that changed, so
			// only the proxy's subscribed clusters among them are sent.
			if names := subscribedOf(t.names, p.Endpoints); len(names) > 0 {
				if err := s.respondPartial(t, names); err != nil {
					return err
				}
			}
			continue
		}
		if err := s.respond(t, false); err != nil {
			return err
		}
	}
	return nil
}

// respond generates t's full set and sends it, unless force is false and its
// digest equals the last one sent (unchanged, or the content the proxy
// rejected).
func (s *sotwStream) respond(t *sotwType, force bool) error {
	var res []engine.Resource
	if !t.empty && (t.wildcard || len(t.names) > 0 || !t.sent) { // the first response also learns whether the type is served
		var a answer
		var err error
		if res, a, err = s.generate(t.typeURL, t.names, t.wildcard); a == answerNone {
			return err
		}
		t.empty = a == answerEmpty
	}
	d := setDigest(res)
	if !force && t.sent && d == t.digest {
		s.releaseScratch()
		return nil
	}
	n := len(res)
	nonce, err := s.sendResponse(t, d, d, res)
	if err != nil {
		return err
	}
	t.sent, t.digest, t.version, t.nonce, t.partial = true, d, d, nonce, false
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("xds response sent", "type", t.typeURL, "resources", n,
			"version", versionString(d), "nonce", nonce)
	}
	return nil
}

// sendResponse sends res as a response of t's type with version_info version and
// releases the stream's scratch. Streams that send the same resources send
// the same bytes but for the nonce: the body is assembled once per
// (version, content) and shared, the nonce goes after it (protobuf fields
// may come in any order). content names the resources themselves; it is
// version for a full set.
func (s *sotwStream) sendResponse(t *sotwType, version, content uint64, res []engine.Resource) (nonce uint64, err error) {
	h := wireHeader{version: version, nonce: s.nextNonce(), typeURL: t.typeURL, controlPlane: s.srv.controlPlane}
	body := s.srv.sharedBodyOf(&h, content, res)
	t.body = body // kept shared while this stream holds it (shared_body.go)
	buf := getBuf(sizeField(fieldRespNonce, decimalLen(h.nonce)))
	var scratch [20]byte
	*buf = appendField(*buf, fieldRespNonce, appendDecimal(scratch[:0], h.nonce))
	s.releaseScratch()
	return h.nonce, s.sendShared(t.typeURL, h.version, body, buf)
}

// respondPartial sends the resources of names only (an EDS update). Its
// version is the digest of that partial set, tagged so that it never equals
// a full set's: the next full push then resends the whole set once.
func (s *sotwStream) respondPartial(t *sotwType, names []string) error {
	res, a, err := s.generate(t.typeURL, names, false)
	if a != answerServed {
		return err
	}
	if len(res) == 0 {
		s.releaseScratch()
		return nil
	}
	d := setDigest(res) ^ partialTag
	nonce, err := s.sendResponse(t, d, d, res)
	if err != nil {
		return err
	}
	t.sent, t.digest, t.version, t.nonce, t.partial = true, d, d, nonce, true
	return nil
}

// respondAdded answers an EDS subscription change of a proxy that holds
// the full set of its previous subscription (the last response was a full
// set it ACKed): EDS is not a state-of-the-world type for the proxy, so
// only the assignments of the added clusters are sent, under the digest of
// the whole new set — what the proxy then holds. A subscription that only
// shrank is answered with nothing. After a config change that adds one
// cluster, a proxy gets one assignment instead of all of them again.
func (s *sotwStream) respondAdded(t *sotwType, before []string) error {
	res, ans, err := s.generate(t.typeURL, t.names, false)
	if ans != answerServed {
		return err
	}
	d := setDigest(res)
	a := addedResources(before, t.names, res, d)
	t.added = a // kept shared while this stream holds it (sotw_shared.go)
	if len(a.res) == 0 {
		s.releaseScratch()
		t.digest = d
		return nil
	}
	nonce, err := s.sendResponse(t, d, setDigest(a.res)^addedTag, a.res)
	if err != nil {
		return err
	}
	t.digest, t.version, t.nonce = d, d, nonce
	return nil
}

// partialTag marks the digests of partial responses.
const partialTag = 0x5bd1e9955bd1e995

// addedTag marks the content digests of responses to subscription changes.
const addedTag = 0x2545f4914f6cdd1d

// subscribedOf returns the names of changed that are in the sorted list subs.
func subscribedOf(subs, changed []string) []string {
	var out []string
	for _, n := range changed {
		if _, ok := slices.BinarySearch(subs, n); ok {
			out = append(out, n)
		}
	}
	return out
}

// nack records a rejection of the last response: logged, counted and
// reported once per nonce, however often the proxy repeats it.
func (s *sotwStream) nack(t *sotwType, req *discoveryv3.DiscoveryRequest) {
	if t.nacked && t.nackedAt == t.nonce {
		s.log.Debug("xds repeated rejection ignored", "type", t.typeURL, "nonce", t.nonce)
		return
	}
	t.nacked, t.nackedAt = true, t.nonce
	version := versionString(t.version)
	msg := keepClipped(req.GetErrorDetail().GetMessage(), clipMessage)
	s.srv.metrics.Rejected(t.typeURL)
	s.log.Warn("xds config rejected", "type", t.typeURL, "version", version, "nonce", t.nonce, "err", msg)
	s.sess.Nacked(t.typeURL, version, msg)
}

// lookup returns typeURL's state, nil before its first response.
func (s *sotwStream) lookup(typeURL string) *sotwType {
	for _, t := range s.types {
		if t.typeURL == typeURL {
			return t
		}
	}
	return nil
}

// insert adds t to the stream's types in push order.
func (s *sotwStream) insert(t *sotwType) {
	r := typeRank(t.typeURL)
	i := 0
	for i < len(s.types) && typeRank(s.types[i].typeURL) <= r {
		i++
	}
	s.types = slices.Insert(s.types, i, t)
}

// setNames applies a request's resource_names and reports whether the
// subscription changed. names is the request's own slice: it is reordered
// and kept.
func (t *sotwType) setNames(names []string) bool {
	raw := namesDigest(names)
	if t.rawSeen && raw == t.rawNames {
		return false
	}
	t.rawNames, t.rawSeen = raw, true
	wildcard := false
	if len(names) == 0 && !t.named && wildcardType(t.typeURL) {
		wildcard = true // legacy wildcard: CDS or LDS never named
	}
	if len(names) > 0 {
		t.named = true
	}
	names, star, entry := sortNames(names, raw)
	wildcard = wildcard || star
	changed := wildcard != t.wildcard || !sameNames(names, t.names)
	switch {
	case !changed:
		names = t.names
	case len(names) < sharedNamesMin:
		names = detachNames(names) // the request's substrings: do not pin it
	default:
		names = sharedNames(names)
	}
	t.wildcard, t.names = wildcard, names
	if entry != nil || changed {
		t.sorted = entry // kept shared while this stream holds it (sotw_shared.go)
	}
	return changed
}

// wildcardType reports whether an empty subscription to typeURL means "all"
// (the xDS legacy wildcard, for Listener and Cluster, and the NameTable,
// which istio-agent asks for without names).
func wildcardType(typeURL string) bool {
	return typeURL == engine.TypeCluster || typeURL == engine.TypeListener || typeURL == engine.TypeNameTable
}

// namesDigest hashes a resource_names list in order (maphash: hardware
// accelerated, about a nanosecond per short name).
func namesDigest(names []string) uint64 {
	h := uint64(len(names)) + 1
	for _, s := range names {
		h = h*0x9E3779B97F4A7C15 ^ maphash.String(namesSeed, s)
	}
	return h
}

var namesSeed = maphash.MakeSeed()
