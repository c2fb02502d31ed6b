package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// TestGatewayTargetPortsMatchIstiod: on case gw-targetport (an ingress
// gateway whose Service maps 80 to 8080 and 443 to 8443, a second Service
// opting out of translation for 8081, and a server port no Service has),
// the router's listeners are istiod's: the same names and ports, the same
// route configuration names on their connection managers, the EnvoyFilter
// LISTENER patch matched by the translated port; and its route
// configurations are istiod's in name, headers (ROUTE_CONFIGURATION
// patches matched by the server's port through istiod's port map, not by
// the translated one), virtual host names and domains (the server's
// port), and routes (a VirtualService match on the server's port applies,
// one on the translated port does not).
func TestGatewayTargetPortsMatchIstiod(t *testing.T) {
	c, err := istiodref.LoadCase("gw-targetport")
	if err != nil {
		t.Fatal(err)
	}
	e := caseEngine(t, c, Options{})
	var diffs []string
	listeners, routes := 0, 0
	eachRefProxy(t, c, e, "", func(rp *refProxy) {
		if got, want := slices.Sorted(mapKeys(rp.listeners)), slices.Sorted(mapKeys(rp.dump.Listeners)); !slices.Equal(got, want) {
			diffs = append(diffs, fmt.Sprintf("%s: listeners %v, istiod's %v", rp.Name, got, want))
		}
		var rdsNames []string
		rp.eachListener(&diffs, func(name string, istiod, pilotfish map[string]any) {
			listeners++
			for _, f := range []string{"address", "perConnectionBufferLimitBytes"} {
				if g, w := jsonString(t, pilotfish[f]), jsonString(t, istiod[f]); g != w {
					diffs = append(diffs, fmt.Sprintf("%s: listener %s: %s %s, istiod's %s", rp.Name, name, f, g, w))
				}
			}
			rds := func(l map[string]any) []string {
				var out []string
				eachHCM(t, l, func(_ string, hcm map[string]any) {
					r, _ := hcm["rds"].(map[string]any)
					out = append(out, fmt.Sprintf("%v %v", r["routeConfigName"], hcm["statPrefix"]))
				})
				return out
			}
			if g, w := rds(pilotfish), rds(istiod); !slices.Equal(g, w) {
				diffs = append(diffs, fmt.Sprintf("%s: listener %s: HCMs (rds, stat prefix) %v, istiod's %v", rp.Name, name, g, w))
			}
			for _, r := range rds(istiod) {
				rdsNames = append(rdsNames, strings.Fields(r)[0])
			}
		})
		rs, err := rp.conn.Generate(TypeRoute, rdsNames, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]any{}
		for _, r := range rs {
			if err := xdstest.Validate(anyMessage(t, r.Any)); err != nil {
				t.Errorf("%s: route %s: %v", rp.Name, r.Name, err)
			}
			got[r.Name], _ = anyJSON(t, r.Any).(map[string]any)
		}
		for _, name := range slices.Sorted(mapKeys(rp.dump.Routes)) {
			routes++
			g, ok := got[name]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s: route %s: pilotfish sends none (it sends %v)", rp.Name, name, slices.Sorted(mapKeys(got))))
				continue
			}
			if g, w := routeShape(t, g), routeShape(t, rp.dump.Routes[name]); g != w {
				diffs = append(diffs, fmt.Sprintf("%s: route %s:\n  pilotfish %s\n  istiod    %s", rp.Name, name, g, w))
			}
		}
	})
	for _, d := range diffs {
		t.Error(d)
	}
	if listeners != 4 || routes != 4 {
		t.Errorf("compared %d listeners and %d route configurations, want istiod's 4 and 4", listeners, routes)
	}
}

// routeShape is what TestGatewayTargetPortsMatchIstiod compares of a route
// configuration (generic JSON): its name and headers, and each virtual
// host's name, domains and routes' matches and headers.
func routeShape(t *testing.T, rc map[string]any) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%v headers %s;", rc["name"], jsonString(t, rc["responseHeadersToAdd"]))
	for _, v := range jsonList(rc["virtualHosts"]) {
		vh, _ := v.(map[string]any)
		fmt.Fprintf(&b, " vh %v %s:", vh["name"], jsonString(t, vh["domains"]))
		for _, r := range jsonList(vh["routes"]) {
			rt, _ := r.(map[string]any)
			fmt.Fprintf(&b, " [%s %s]", jsonString(t, rt["match"]), jsonString(t, rt["responseHeadersToAdd"]))
		}
	}
	return b.String()
}
