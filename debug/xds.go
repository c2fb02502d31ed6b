package debug

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// istiod's per-proxy debug endpoints, with its paths and JSON shapes:
// /debug/syncz, /debug/connections, /debug/config_dump, plus pilotfish's
// /debug/keyz. They read serve's registry of live streams and regenerate a
// proxy's resources through the engine; nothing here runs on a push path.

// registerXDS adds the per-proxy endpoints to the HTTP server.
func registerXDS(s *serve.HTTPServer, v Views) {
	e, x := v.Engine, v.XDS
	instance := ControlPlaneName(v.ControlPlaneID)
	s.Handle("/debug/syncz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if instance != "" {
			w.Header().Set(InstanceHeader, instance) // proxy-status's ISTIOD column
		}
		writeJSON(w, syncz(e, x.Connections(), r.URL.Query().Get("namespace")))
	}))
	s.Handle("/debug/connections", jsonHandler(func(*http.Request) any { return connectionsView(e, x.Connections()) }))
	s.Handle("/debug/config_dump", proxyHandler(x, func(w http.ResponseWriter, r *http.Request, c serve.ConnInfo) {
		dump, err := configDump(e, c, r.URL.Query().Has("include_eds"))
		if err != nil {
			http.Error(w, fmt.Sprintf("config dump of %s: %v", c.ID, err), http.StatusInternalServerError)
			return
		}
		writeProtoJSON(w, dump)
	}))
	s.Handle("/debug/keyz", proxyHandler(x, func(w http.ResponseWriter, r *http.Request, c serve.ConnInfo) {
		name := r.URL.Query().Get("resource")
		if name == "" {
			http.Error(w, "keyz: give the resource name in the query string: /debug/keyz?proxyID=POD.NAMESPACE&resource=NAME", http.StatusBadRequest)
			return
		}
		v, err := keyz(e, c, name, r.URL.Query().Get("type"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, v)
	}))
}

// proxyHandler resolves ?proxyID= to a live stream, answering 400 without
// one and 404 for a proxy not connected here (istiod's messages).
func proxyHandler(x *serve.XDSServer, h func(http.ResponseWriter, *http.Request, serve.ConnInfo)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("proxyID")
		if id == "" {
			http.Error(w, "You must provide a proxyID in the query string", http.StatusBadRequest)
			return
		}
		c, ok := x.Connection(id)
		if !ok {
			http.Error(w, fmt.Sprintf("Proxy %q not connected to this Pilot instance. It may be connected to another instance.", id), http.StatusNotFound)
			return
		}
		h(w, r, c)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// protoJSON is how debug output renders protobuf messages: Envoy's admin
// API field names (snake_case), Any resolved through the linked types.
var protoJSON = protojson.MarshalOptions{UseProtoNames: true, Indent: "  "}

func writeProtoJSON(w http.ResponseWriter, m proto.Message) {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// SyncStatus is one proxy in /debug/syncz: istiod's SyncStatus (the same
// JSON names, *_sent and *_acked being nonces as istiod reports them), so
// tools written for istiod read it. Resources adds, per type URL, the
// versions and the last rejection.
type SyncStatus struct {
	ClusterID            string                    `json:"cluster_id,omitempty"`
	ProxyID              string                    `json:"proxy,omitempty"`
	ProxyType            string                    `json:"proxy_type,omitempty"`
	ProxyVersion         string                    `json:"proxy_version,omitempty"`
	IstioVersion         string                    `json:"istio_version,omitempty"`
	ClusterSent          string                    `json:"cluster_sent,omitempty"`
	ClusterAcked         string                    `json:"cluster_acked,omitempty"`
	ListenerSent         string                    `json:"listener_sent,omitempty"`
	ListenerAcked        string                    `json:"listener_acked,omitempty"`
	RouteSent            string                    `json:"route_sent,omitempty"`
	RouteAcked           string                    `json:"route_acked,omitempty"`
	EndpointSent         string                    `json:"endpoint_sent,omitempty"`
	EndpointAcked        string                    `json:"endpoint_acked,omitempty"`
	ExtensionConfigSent  string                    `json:"extensionconfig_sent,omitempty"`
	ExtensionConfigAcked string                    `json:"extensionconfig_acked,omitempty"`
	Resources            map[string]ResourceStatus `json:"resources,omitempty"`
}

// ResourceStatus is one type URL of a proxy: istiod's fields (sent and
// acked nonces, send time, last error) and pilotfish's (versions, status).
type ResourceStatus struct {
	Sent          string    `json:"sent,omitempty"`
	Acked         string    `json:"acked,omitempty"`
	SentTime      time.Time `json:"sentTime,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	SentVersion   string    `json:"sentVersion,omitempty"`
	AckedVersion  string    `json:"ackedVersion,omitempty"`
	NackedVersion string    `json:"nackedVersion,omitempty"`
	// Status is istioctl's reading: SYNCED, STALE, NOT SENT or ERROR.
	Status string `json:"status"`
}

// TypeExtensionConfig is ECDS's type URL: istiod's SyncStatus has a
// column for it (the column reads IGNORED).
const TypeExtensionConfig = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"

// syncStatusOf is istioctl's reading of one type's state: ERROR after a
// rejection, NOT SENT before any response, SYNCED when the last response
// sent is acknowledged, STALE while it is not (yet).
func syncStatusOf(t *serve.TypeStatus) string {
	switch {
	case t.Error != "":
		return "ERROR"
	case t.SentNonce == "":
		return "NOT SENT"
	case t.AckedNonce == t.SentNonce:
		return "SYNCED"
	}
	return "STALE"
}

// syncz renders the proxies' sync status, sorted by stream ID; namespace
// filters by the proxies' namespace. Tools' debug streams are left out.
func syncz(e *engine.Engine, conns []serve.ConnInfo, namespace string) []SyncStatus {
	out := []SyncStatus{}
	ecs := e.ConnsByID()
	for i := range conns {
		c := &conns[i]
		if c.Debug || (namespace != "" && proxyNamespace(ecs, c) != namespace) {
			continue
		}
		s := SyncStatus{ProxyID: proxyID(ecs, c), ProxyType: proxyType(c), ClusterID: c.Meta.ClusterID, IstioVersion: c.Meta.IstioVersion,
			Resources: map[string]ResourceStatus{}}
		for j := range c.Types {
			t := &c.Types[j]
			if isDebugTypeURL(t.TypeURL) {
				continue
			}
			s.Resources[t.TypeURL] = ResourceStatus{Sent: t.SentNonce, Acked: t.AckedNonce, SentTime: t.SentAt, LastError: t.Error,
				SentVersion: t.SentVersion, AckedVersion: t.AckedVersion, NackedVersion: t.NackedVersion, Status: syncStatusOf(t)}
			switch t.TypeURL {
			case engine.TypeCluster:
				s.ClusterSent, s.ClusterAcked = t.SentNonce, t.AckedNonce
			case engine.TypeListener:
				s.ListenerSent, s.ListenerAcked = t.SentNonce, t.AckedNonce
			case engine.TypeRoute:
				s.RouteSent, s.RouteAcked = t.SentNonce, t.AckedNonce
			case engine.TypeEndpoint:
				s.EndpointSent, s.EndpointAcked = t.SentNonce, t.AckedNonce
			case TypeExtensionConfig:
				s.ExtensionConfigSent, s.ExtensionConfigAcked = t.SentNonce, t.AckedNonce
			}
		}
		out = append(out, s)
	}
	return out
}

func isDebugTypeURL(t string) bool { return strings.HasPrefix(t, serve.DebugTypePrefix) }

// proxyID is istiod's proxy ID, "POD.NAMESPACE", as the engine parsed it
// from the node; the stream's ID for one the engine no longer holds (it
// closed since the registry was read). ecs is Engine.ConnsByID.
func proxyID(ecs map[string]*engine.Conn, c *serve.ConnInfo) string {
	if ec, ok := ecs[c.ID]; ok {
		return ec.Node().ID
	}
	return c.ID
}

func proxyNamespace(ecs map[string]*engine.Conn, c *serve.ConnInfo) string {
	if ec, ok := ecs[c.ID]; ok {
		return ec.Node().Namespace
	}
	return c.Meta.Namespace
}

// proxyType is istiod's node type: sidecar or router (proxyless gRPC
// clients connect as sidecars).
func proxyType(c *serve.ConnInfo) string {
	if i := strings.IndexByte(c.NodeID, '~'); i > 0 {
		return c.NodeID[:i]
	}
	return ""
}

// AdsClients is /debug/connections: istiod's shape (totalClients, clients
// with connectionId, connectedAt, address, watches) with pilotfish's
// additions (proxy, node, stream kind, types).
type AdsClients struct {
	Total     int         `json:"totalClients"`
	Connected []AdsClient `json:"clients"`
}

// AdsClient is one live stream.
type AdsClient struct {
	ConnectionID string              `json:"connectionId"`
	ProxyID      string              `json:"proxy"`
	NodeID       string              `json:"node"`
	ConnectedAt  time.Time           `json:"connectedAt"`
	PeerAddress  string              `json:"address"`
	Stream       string              `json:"stream"` // "sotw" or "delta"
	Debug        bool                `json:"debug,omitempty"`
	Metadata     serve.NodeMeta      `json:"metadata"`
	Types        []string            `json:"types"`
	Watches      map[string][]string `json:"watches,omitempty"`
}

func connectionsView(e *engine.Engine, conns []serve.ConnInfo) AdsClients {
	out := AdsClients{Total: len(conns), Connected: []AdsClient{}}
	ecs := e.ConnsByID()
	for i := range conns {
		c := &conns[i]
		a := AdsClient{ConnectionID: c.ID, ProxyID: proxyID(ecs, c), NodeID: c.NodeID, ConnectedAt: c.ConnectedAt, PeerAddress: c.Peer,
			Stream: "sotw", Debug: c.Debug, Metadata: c.Meta, Types: []string{}}
		if c.Delta {
			a.Stream = "delta"
		}
		for _, t := range c.Types {
			a.Types = append(a.Types, t.TypeURL)
			if len(t.Names) > 0 {
				if a.Watches == nil {
					a.Watches = map[string][]string{}
				}
				a.Watches[t.TypeURL] = t.Names
			}
		}
		out.Connected = append(out.Connected, a)
	}
	return out
}
