package debug

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// Views are what the debug endpoints read. Engine and XDS are required.
type Views struct {
	// Engine regenerates a proxy's resources and renders the snapshot.
	Engine *engine.Engine
	// XDS lists the live streams and their sync status.
	XDS *serve.XDSServer
	// Errors lists the config sources' current problems
	// (/debug/config_errors): errors, and warnings such as the fields
	// pilotfish does not support; nil shows none.
	Errors func() []error
	// Pushes follows pushes for /debug/push_status; nil shows none.
	Pushes *PushStatus
	// ControlPlaneID is the replica's identifier, as given to
	// serve.XDSOptions.ControlPlaneID (ControlPlaneID's JSON): its ID goes
	// out in /debug/syncz's InstanceHeader.
	ControlPlaneID string
}

// Register adds pilotfish's debug endpoints to the HTTP server: the
// snapshot's (/debug/endpointz, registryz, configz, config_errors,
// cachez, push_status) and the per-proxy ones of xds.go (/debug/syncz,
// connections, config_dump, keyz).
func Register(s *serve.HTTPServer, v Views) {
	e := v.Engine
	registerXDS(s, v)
	s.Handle("/debug/endpointz", jsonHandler(func(*http.Request) any { return endpointz(e.Snapshot()) }))
	s.Handle("/debug/push_status", jsonHandler(func(*http.Request) any { return v.Pushes.view() }))
	s.Handle("/debug/registryz", jsonHandler(func(*http.Request) any { return engine.Registry(e.Snapshot()) }))
	s.Handle("/debug/configz", jsonHandler(func(*http.Request) any { return engine.Configs(e.Snapshot()) }))
	s.Handle("/debug/config_errors", jsonHandler(func(*http.Request) any {
		out := []string{}
		if v.Errors != nil {
			for _, err := range v.Errors() {
				out = append(out, err.Error())
			}
		}
		out = append(out, e.ProviderProblems()...)
		return append(out, patchFailures(e.Cache())...)
	}))
	s.Handle("/debug/cachez", jsonHandler(func(*http.Request) any { return cachez(e.Cache()) }))
}

// patchFailures are the EnvoyFilter patches that failed to apply at the
// cache's recent generations (it keeps the last 64; the count is
// pilotfish_envoy_filter_failures_total), each once, oldest first: a patch
// istiod would skip with an error is skipped and said here, not silently.
// A failure stays listed until newer ones push it out, after the filter
// is fixed too: "recent" says so.
func patchFailures(c *encode.Cache) []string {
	_, fails := c.PatchFailures()
	var out []string
	for _, f := range fails {
		msg := fmt.Sprintf("EnvoyFilter %s: spec.configPatches[%d]: not applied at a recent generation: %s", f.Source, f.Index, f.Err)
		if !slices.Contains(out, msg) {
			out = append(out, msg)
		}
	}
	return out
}

// ControlPlaneID is the identifier to send as control_plane.identifier in
// every response (serve.XDSOptions.ControlPlaneID), in istiod's JSON shape
// (IstioControlPlaneInstance), so istioctl names the replica that answered
// (its ISTIOD column) and proxies' config dumps show which replica
// configured them. The ID is the pod name (POD_NAME) or the host name;
// version is pilotfish's.
func ControlPlaneID(version string) string {
	id := os.Getenv("POD_NAME")
	if id == "" {
		id, _ = os.Hostname()
	}
	b, _ := json.Marshal(map[string]any{
		"Component": "pilotfish",
		"ID":        id,
		"Info":      map[string]string{"version": version},
	})
	return string(b)
}

// ControlPlaneName reads the ID of istiod's control-plane identifier JSON;
// an identifier in another shape is returned whole.
func ControlPlaneName(id string) string {
	var cp struct{ ID string }
	if err := json.Unmarshal([]byte(id), &cp); err != nil || cp.ID == "" {
		return id
	}
	return cp.ID
}

// InstanceHeader carries the replica's ID on /debug/syncz, for
// proxy-status's ISTIOD column (the xDS answer carries it in
// control_plane).
const InstanceHeader = "Pilotfish-Instance"

func jsonHandler(view func(*http.Request) any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, view(r))
	})
}
