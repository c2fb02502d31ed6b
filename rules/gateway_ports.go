package rules

import (
	"slices"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Gateway port translation, as istiod's resolvePorts for a Gateway that
// selects its routers by labels: a server of number N listens on the
// target port of the router's service port N (Istio's chart maps port 80
// to 8080 and 443 to 8443, so that the router runs unprivileged), else on
// N. The first matching service port wins (routers' targets are sorted by
// port, then hostname). A Service labelled
// experimental.istio.io/disable-gateway-port-translation is left out.
// The listener, its name and an HTTP server's route configuration
// ("http.8080") take the translated port; virtual host names, route
// matches and an HTTPS server's route configuration keep the number.

// disablePortTranslationLabel is istiod's DisableGatewayPortTranslationLabel.
const disablePortTranslationLabel = "experimental.istio.io/disable-gateway-port-translation"

// gatewayListenPort is the port a router of sc listens on for a server of
// this number.
func gatewayListenPort(sc *Scope, number uint32) uint32 {
	for i := range sc.GatewayTargets {
		t := &sc.GatewayTargets[i]
		if t.Port.Number == number && !hasLabelKey(sc.Snapshot, t.Service.Labels, disablePortTranslationLabel) {
			return t.TargetPort
		}
	}
	return number
}

// hasLabelKey reports whether the label set holds key.
func hasLabelKey(snap *index.Snapshot, set index.LabelSetID, key string) bool {
	for _, l := range snap.Labels.Get(set) {
		if snap.String(l.Key) == key {
			return true
		}
	}
	return false
}

// serverPorts is istiod's GatewayPortMap entry of a route configuration:
// the numbers of the servers of every route configuration whose name
// holds the same port (a ROUTE_CONFIGURATION patch's portNumber matches
// one of them). nil when that is only the route port itself, which the
// match compares without a map.
func (m *mergedGateway) serverPorts(name string) []uint32 {
	port := envoypatch.GatewayRoutePort(name)
	var out []uint32
	for rn, servers := range m.byRoute {
		if envoypatch.GatewayRoutePort(rn) != port {
			continue
		}
		for _, s := range servers {
			if n := s.Server().GetPort().GetNumber(); !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 || (len(out) == 1 && int(out[0]) == port) {
		return nil
	}
	slices.Sort(out)
	return out
}
