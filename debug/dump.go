package debug

import (
	"fmt"
	"sort"
	"strconv"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// A proxy's resources in Envoy's config-dump shape (/debug/config_dump and
// istio.io/debug/config_dump), and the sync status as
// envoy.service.status.v3.ClientConfig (istio.io/debug/syncz): what
// istioctl reads from istiod.

// configDump regenerates the resources c's proxy subscribes to from the
// current snapshot (as istiod does) and returns them as Envoy's admin
// ConfigDump: bootstrap, clusters, endpoints (with includeEDS; istiod
// leaves them out by default, as Envoy does), listeners, scoped routes,
// routes, secrets and extension configs (ECDS), with private keys and
// Wasm pull secrets redacted. Each dynamic resource
// carries the version and time of the last response of its type.
func configDump(e *engine.Engine, c serve.ConnInfo, includeEDS bool) (*adminv3.ConfigDump, error) {
	ec, ok := e.Conn(c.ID)
	if !ok {
		return nil, fmt.Errorf("stream %s has no engine connection (it just closed?)", c.ID)
	}
	got := map[string][]*anypb.Any{}
	for i := range c.Types {
		t := &c.Types[i]
		if isDebugTypeURL(t.TypeURL) || (t.TypeURL == engine.TypeEndpoint && !includeEDS) {
			continue
		}
		res, err := ec.Resources(t.TypeURL, t.Names, t.Wildcard, nil)
		if err != nil {
			continue // a type the engine does not serve: never answered either
		}
		for _, r := range res {
			a := &anypb.Any{}
			if err := proto.Unmarshal(r.Any, a); err != nil {
				return nil, fmt.Errorf("%s %q: %w", t.TypeURL, r.Name, err)
			}
			if t.TypeURL == engine.TypeSecret {
				if a, err = redactSecret(a); err != nil {
					return nil, fmt.Errorf("secret %q: %w", r.Name, err)
				}
			}
			got[t.TypeURL] = append(got[t.TypeURL], a)
		}
	}
	version := func(typeURL string) (string, *timestamppb.Timestamp) {
		for _, t := range c.Types {
			if t.TypeURL == typeURL && !t.SentAt.IsZero() {
				return t.SentVersion, timestamppb.New(t.SentAt)
			}
		}
		return "", nil
	}

	cv, cat := version(engine.TypeCluster)
	clusters := &adminv3.ClustersConfigDump{VersionInfo: cv}
	for _, a := range got[engine.TypeCluster] {
		clusters.DynamicActiveClusters = append(clusters.DynamicActiveClusters,
			&adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: cv, Cluster: a, LastUpdated: cat})
	}
	lv, lat := version(engine.TypeListener)
	listeners := &adminv3.ListenersConfigDump{VersionInfo: lv}
	for _, a := range got[engine.TypeListener] {
		listeners.DynamicListeners = append(listeners.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{
			Name:        resourceName(a),
			ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: lv, Listener: a, LastUpdated: lat},
		})
	}
	rv, rat := version(engine.TypeRoute)
	routes := &adminv3.RoutesConfigDump{}
	for _, a := range got[engine.TypeRoute] {
		routes.DynamicRouteConfigs = append(routes.DynamicRouteConfigs,
			&adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: rv, RouteConfig: a, LastUpdated: rat})
	}
	sv, sat := version(engine.TypeSecret)
	secrets := &adminv3.SecretsConfigDump{}
	for _, a := range got[engine.TypeSecret] {
		secrets.DynamicActiveSecrets = append(secrets.DynamicActiveSecrets,
			&adminv3.SecretsConfigDump_DynamicSecret{Name: resourceName(a), VersionInfo: sv, Secret: a, LastUpdated: sat})
	}

	parts := []proto.Message{&adminv3.BootstrapConfigDump{}, clusters}
	if includeEDS {
		ev, eat := version(engine.TypeEndpoint)
		endpoints := &adminv3.EndpointsConfigDump{}
		for _, a := range got[engine.TypeEndpoint] {
			endpoints.DynamicEndpointConfigs = append(endpoints.DynamicEndpointConfigs,
				&adminv3.EndpointsConfigDump_DynamicEndpointConfig{VersionInfo: ev, EndpointConfig: a, LastUpdated: eat})
		}
		parts = append(parts, endpoints)
	}
	xv, xat := version(engine.TypeExtensionConfig)
	ecds, err := ecdsDump(got[engine.TypeExtensionConfig], xv, xat) // dump_ecds.go
	if err != nil {
		return nil, err
	}
	parts = append(parts, listeners, &adminv3.ScopedRoutesConfigDump{}, routes, secrets, ecds)
	dump := &adminv3.ConfigDump{}
	for _, m := range parts {
		a, err := anypb.New(m)
		if err != nil {
			return nil, err
		}
		dump.Configs = append(dump.Configs, a)
	}
	return dump, nil
}

// resourceName reads field 1 (name in Listener, Secret, Cluster and
// RouteConfiguration) of an encoded resource.
func resourceName(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if err != nil {
		return ""
	}
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	return ""
}

// redactSecret replaces a TLS certificate's private key with "[redacted]",
// as istiod's config dump does. Other secrets (validation contexts) carry
// nothing private and pass unchanged.
func redactSecret(a *anypb.Any) (*anypb.Any, error) {
	s := &tlsv3.Secret{}
	if err := a.UnmarshalTo(s); err != nil {
		return nil, err
	}
	cert := s.GetTlsCertificate()
	if cert == nil || cert.GetPrivateKey() == nil {
		return a, nil
	}
	cert.PrivateKey = &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("[redacted]")}}
	return anypb.New(s)
}

// clientConfigs is istio.io/debug/syncz: one ClientConfig per connected
// proxy (tools' debug streams left out), its node carrying the metadata
// istioctl reads (CLUSTER_ID, NAMESPACE, ISTIO_VERSION) and one generic
// xDS config per type with istiod's status mapping.
func clientConfigs(e *engine.Engine, conns []serve.ConnInfo) ([]engine.Resource, error) {
	var out []engine.Resource
	ecs := e.ConnsByID()
	for i := range conns {
		c := &conns[i]
		if c.Debug {
			continue
		}
		md := map[string]any{}
		for k, v := range map[string]string{"CLUSTER_ID": c.Meta.ClusterID, "NAMESPACE": proxyNamespace(ecs, c), "ISTIO_VERSION": c.Meta.IstioVersion} {
			if v != "" {
				md[k] = v
			}
		}
		meta, err := structpb.NewStruct(md)
		if err != nil {
			return nil, err
		}
		cc := &statusv3.ClientConfig{Node: &corev3.Node{Id: proxyID(ecs, c), Metadata: meta}}
		for j := range c.Types {
			t := &c.Types[j]
			if isDebugTypeURL(t.TypeURL) {
				continue
			}
			g := &statusv3.ClientConfig_GenericXdsConfig{TypeUrl: t.TypeURL, ConfigStatus: configStatus(t)}
			if !t.SentAt.IsZero() {
				g.LastUpdated = timestamppb.New(t.SentAt)
			}
			if t.Error != "" {
				g.ErrorState = &adminv3.UpdateFailureState{LastUpdateAttempt: timestamppb.New(t.NackedAt), Details: t.Error, VersionInfo: t.NackedVersion}
			}
			if t.AckedVersion != "" {
				g.VersionInfo = t.AckedVersion
			}
			cc.GenericXdsConfigs = append(cc.GenericXdsConfigs, g)
		}
		sort.Slice(cc.GenericXdsConfigs, func(a, b int) bool { return cc.GenericXdsConfigs[a].TypeUrl < cc.GenericXdsConfigs[b].TypeUrl })
		r, err := anyResource(cc.Node.Id, c.ID, cc)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// configStatus maps a type's state to the CSDS status istiod reports.
func configStatus(t *serve.TypeStatus) statusv3.ConfigStatus {
	switch syncStatusOf(t) {
	case "ERROR":
		return statusv3.ConfigStatus_ERROR
	case "NOT SENT":
		return statusv3.ConfigStatus_NOT_SENT
	case "SYNCED":
		return statusv3.ConfigStatus_SYNCED
	}
	return statusv3.ConfigStatus_STALE
}

// anyResource encodes m as a google.protobuf.Any for a debug response.
func anyResource(name, version string, m proto.Message) (engine.Resource, error) {
	a, err := anypb.New(m)
	if err != nil {
		return engine.Resource{}, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	if err != nil {
		return engine.Resource{}, err
	}
	return engine.Resource{Name: name, Version: version, Any: b}, nil
}

// XDS answers istiod's debug types on the ADS stream
// (serve.XDSOptions.Debug): istio.io/debug/syncz and
// istio.io/debug/config_dump, regenerating a proxy's resources through e.
func XDS(e *engine.Engine) serve.DebugSource {
	return func(x *serve.XDSServer, typeURL string, names []string) ([]engine.Resource, error) {
		return xdsDebug(e, x, typeURL, names)
	}
}

func xdsDebug(e *engine.Engine, x *serve.XDSServer, typeURL string, names []string) ([]engine.Resource, error) {
	switch typeURL {
	case serve.TypeDebugSyncz:
		return clientConfigs(e, x.Connections())
	case serve.TypeDebugConfigDump:
		if len(names) != 1 {
			return nil, fmt.Errorf("%s wants exactly one resource name, a proxy ID; got %d", typeURL, len(names))
		}
		c, ok := x.Connection(names[0])
		if !ok {
			return nil, fmt.Errorf("config dump could not find connection for proxyID %q", names[0])
		}
		dump, err := configDump(e, c, false)
		if err != nil {
			return nil, err
		}
		// istiod answers with the dump's parts as unnamed resources.
		out := make([]engine.Resource, 0, len(dump.Configs))
		for i, a := range dump.Configs {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
			if err != nil {
				return nil, err
			}
			out = append(out, engine.Resource{Name: strconv.Itoa(i), Any: b})
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown debug type %s (served: %s, %s)", typeURL, serve.TypeDebugSyncz, serve.TypeDebugConfigDump)
}
