package serve

import (
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// The registry of live streams, for debug endpoints (/debug/syncz,
// /debug/connections, /debug/config_dump) and istiod's debug types on the
// ADS stream. Each stream's protocol state stays behind its own mutex; what
// the registry shows is a copy the stream writes through its session (see
// trackedSession), under a per-stream mutex that only debug readers contend
// for.

// ConnInfo describes one live stream as debug endpoints show it. It is a copy:
// later changes to the stream do not show in it.
type ConnInfo struct {
	// ID is the session's ID, unique per stream ("POD.NAMESPACE-N").
	ID string
	// NodeID is the first request's node id
	// ("sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local").
	NodeID string
	// Meta holds the node metadata debug output shows; the rest of the
	// node is not kept (it can be kilobytes per proxy).
	Meta NodeMeta
	// Peer is the remote address, "" when unknown.
	Peer        string
	ConnectedAt time.Time
	// Delta is true for DeltaAggregatedResources streams.
	Delta bool
	// Debug is true once the stream asked for an istio.io/debug type: it is
	// a tool (istioctl), not a proxy, and syncz leaves it out as istiod does.
	Debug bool
	// Types is the sync status per requested type URL, sorted by type URL.
	Types []TypeStatus
	// Session is the engine's side of the stream.
	Session Session
}

// NodeMeta is the part of a node's metadata debug output shows, with
// istio-agent's keys.
type NodeMeta struct {
	ClusterID    string `json:"CLUSTER_ID,omitempty"`
	Namespace    string `json:"NAMESPACE,omitempty"`
	IstioVersion string `json:"ISTIO_VERSION,omitempty"`
	Generator    string `json:"GENERATOR,omitempty"`
}

// nodeMeta copies the fields debug output shows, clipped: a stream's entry
// keeps a few short strings of its node, never the node.
func nodeMeta(n *corev3.Node) NodeMeta {
	f := n.GetMetadata().GetFields()
	get := func(k string) string { return keepClipped(f[k].GetStringValue(), clipShort) }
	return NodeMeta{
		ClusterID:    get("CLUSTER_ID"),
		Namespace:    get("NAMESPACE"),
		IstioVersion: get("ISTIO_VERSION"),
		Generator:    get("GENERATOR"),
	}
}

// TypeStatus is one type URL's sync status on a stream: what was last sent
// and acknowledged (versions and nonces), and the last rejection.
type TypeStatus struct {
	TypeURL string
	// Names is the last full subscription asked of the engine (nil for a
	// wildcard with no extra names); Wildcard says whether it was one.
	Names    []string
	Wildcard bool

	SentVersion, SentNonce string
	SentAt                 time.Time
	// AckedVersion and AckedNonce are the last response the proxy accepted.
	AckedVersion, AckedNonce string
	AckedAt                  time.Time
	// NackedVersion and Error are the last rejection, cleared by a later
	// ACK (istiod's LastError).
	NackedVersion, Error string
	NackedAt             time.Time
}

// registry holds the server's live streams.
type registry struct {
	mu    sync.Mutex
	conns map[*connStatus]struct{} // guarded by mu
}

func (r *registry) add(s *connStatus) {
	r.mu.Lock()
	if r.conns == nil {
		r.conns = map[*connStatus]struct{}{}
	}
	r.conns[s] = struct{}{}
	r.mu.Unlock()
}

func (r *registry) remove(s *connStatus) {
	r.mu.Lock()
	delete(r.conns, s)
	r.mu.Unlock()
}

func (r *registry) list() []*connStatus {
	r.mu.Lock()
	out := make([]*connStatus, 0, len(r.conns))
	for s := range r.conns {
		out = append(out, s)
	}
	r.mu.Unlock()
	return out
}

// Connections returns the live streams sorted by ID.
func (s *XDSServer) Connections() []ConnInfo {
	list := s.conns.list()
	out := make([]ConnInfo, 0, len(list))
	for _, c := range list {
		out = append(out, c.info())
	}
	slices.SortFunc(out, func(a, b ConnInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Connection finds the live stream of proxyID: its session ID exactly, else
// the first (by ID) whose proxy ID ("POD.NAMESPACE", from the session ID or
// the node ID) or node ID equals it.
// istiod also takes any substring of a session ID ("p", "."), which picks
// an arbitrary proxy; pilotfish matches whole names only, on purpose.
// Debug streams (tools) are skipped.
func (s *XDSServer) Connection(proxyID string) (ConnInfo, bool) {
	if proxyID == "" {
		return ConnInfo{}, false
	}
	all := s.Connections()
	match := []func(c *ConnInfo) bool{
		func(c *ConnInfo) bool { return c.ID == proxyID },
		func(c *ConnInfo) bool {
			return proxyIDOf(c.ID) == proxyID || c.NodeID == proxyID || podOfNode(c.NodeID) == proxyID
		},
	}
	for _, m := range match {
		for i := range all {
			if !all[i].Debug && m(&all[i]) {
				return all[i], true
			}
		}
	}
	return ConnInfo{}, false
}

// podOfNode is the "POD.NAMESPACE" field of an Istio node ID
// ("sidecar~10.0.0.1~POD.NAMESPACE~NAMESPACE.svc.cluster.local"), "" when
// the ID has another shape.
func podOfNode(nodeID string) string {
	parts := strings.SplitN(nodeID, "~", 4)
	if len(parts) != 4 {
		return ""
	}
	return parts[2]
}

// proxyIDOf strips the per-stream suffix of a session ID: "pod.ns-3" →
// "pod.ns".
func proxyIDOf(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// connStatus is one stream's entry in the registry. The stream writes it;
// debug readers copy it.
type connStatus struct {
	id          string
	nodeID      string
	meta        NodeMeta
	peer        string
	connectedAt time.Time
	delta       bool
	sess        Session

	mu    sync.Mutex
	debug bool          // guarded by mu
	types []*TypeStatus // guarded by mu; in first-use order
}

func (c *connStatus) info() ConnInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := ConnInfo{ID: c.id, NodeID: c.nodeID, Meta: c.meta, Peer: c.peer, ConnectedAt: c.connectedAt, Delta: c.delta, Debug: c.debug, Session: c.sess}
	out.Types = make([]TypeStatus, len(c.types))
	for i, t := range c.types {
		out.Types[i] = *t
	}
	slices.SortFunc(out.Types, func(a, b TypeStatus) int { return strings.Compare(a.TypeURL, b.TypeURL) })
	return out
}

// typeLocked returns typeURL's status, creating it. c.mu must be held. The
// stream keeps at most maxTypesPerStream xDS types (input_limits.go) and
// checks debug types against it (debug_types.go).
func (c *connStatus) typeLocked(typeURL string) *TypeStatus {
	for _, t := range c.types {
		if t.TypeURL == typeURL {
			return t
		}
	}
	t := &TypeStatus{TypeURL: typeURL}
	c.types = append(c.types, t)
	return t
}

// hasTypeLocked reports whether typeURL has a status. c.mu must be held.
func (c *connStatus) hasTypeLocked(typeURL string) bool {
	for _, t := range c.types {
		if t.TypeURL == typeURL {
			return true
		}
	}
	return false
}

func (c *connStatus) markDebug() {
	c.mu.Lock()
	c.debug = true
	c.mu.Unlock()
}

// trackedSession records what serve tells the engine's session in the
// stream's registry entry, so the protocol code needs no debug hooks. Its
// methods run under the stream's mutex, like the session's.
type trackedSession struct {
	Session
	st *connStatus
	c  *conn // for the nonce of the response just sent, and whether a push is being sent
}

func (t *trackedSession) Generate(typeURL string, names []string, wildcard bool, dst []engine.Resource) ([]engine.Resource, error) {
	res, err := t.Session.Generate(typeURL, names, wildcard, dst)
	if err != nil {
		return res, err // an unknown type is not recorded: it keeps nothing
	}
	t.st.mu.Lock()
	s := t.st.typeLocked(typeURL)
	// A push of a few changed endpoints (the fast path, respondPartial)
	// asks for a subset of the EDS subscription: keep the full one.
	// Subscriptions change only on requests, outside pushes, where every
	// call is the full set (a smaller one when the proxy unsubscribed).
	// Only a shorter list can be a partial one: a full set skips the search.
	partial := t.c.pushing && typeURL == engine.TypeEndpoint && !wildcard && !s.Wildcard &&
		len(names) < len(s.Names) && subsetOf(names, s.Names)
	if !partial {
		s.Names, s.Wildcard = names, wildcard
	}
	t.st.mu.Unlock()
	return res, nil
}

// subsetOf reports whether every name of a is in the sorted list b.
func subsetOf(a, b []string) bool {
	if len(b) == 0 {
		return false
	}
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); !ok {
			return false
		}
	}
	return true
}

func (t *trackedSession) Sent(typeURL, version string) {
	now := time.Now()
	nonce := string(appendDecimal(nil, t.c.nonce))
	t.st.mu.Lock()
	s := t.st.typeLocked(typeURL)
	s.SentVersion, s.SentNonce, s.SentAt = version, nonce, now
	t.st.mu.Unlock()
	t.Session.Sent(typeURL, version)
}

func (t *trackedSession) Acked(typeURL, version string) {
	now := time.Now()
	t.st.mu.Lock()
	s := t.st.typeLocked(typeURL)
	// serve reports an ACK only for the nonce last sent of its type.
	s.AckedVersion, s.AckedNonce, s.AckedAt = version, s.SentNonce, now
	s.NackedVersion, s.Error = "", ""
	t.st.mu.Unlock()
	t.Session.Acked(typeURL, version)
}

func (t *trackedSession) Nacked(typeURL, version, message string) {
	now := time.Now()
	t.st.mu.Lock()
	s := t.st.typeLocked(typeURL)
	s.NackedVersion, s.Error, s.NackedAt = version, message, now
	t.st.mu.Unlock()
	t.Session.Nacked(typeURL, version, message)
}

// track registers c in the server's registry and routes its session through
// a trackedSession. untrack undoes the registration.
func (s *XDSServer) track(c *conn, node *corev3.Node, peer string) {
	st := &connStatus{id: c.sess.ID(), nodeID: node.GetId(), meta: nodeMeta(node), peer: peer, connectedAt: time.Now(), delta: c.delta, sess: c.sess}
	c.status = st
	c.sess = &trackedSession{Session: c.sess, st: st, c: c}
	s.conns.add(st)
}

func (s *XDSServer) untrack(c *conn) {
	if c.status != nil {
		s.conns.remove(c.status)
	}
}
