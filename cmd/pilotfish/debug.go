package main

import (
	"encoding/json"
	"net/http"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// registerDebug adds pilotfish's JSON debug endpoints to the HTTP server:
// these, and the per-proxy ones of debug_xds.go.
func registerDebug(s *serve.HTTPServer, e *engine.Engine, src interface{ Errors() []error }, x *serve.XDSServer, ps *pushStatus) {
	registerXDSDebug(s, e, x)
	s.Handle("/debug/endpointz", jsonHandler(func(*http.Request) any { return endpointz(e.Snapshot()) }))
	s.Handle("/debug/push_status", jsonHandler(func(*http.Request) any { return ps.view() }))
	s.Handle("/debug/registryz", jsonHandler(func(*http.Request) any { return engine.Registry(e.Snapshot()) }))
	s.Handle("/debug/configz", jsonHandler(func(*http.Request) any { return engine.Configs(e.Snapshot()) }))
	s.Handle("/debug/config_errors", jsonHandler(func(*http.Request) any {
		errs := src.Errors()
		out := make([]string, len(errs))
		for i, err := range errs {
			out[i] = err.Error()
		}
		return out
	}))
	s.Handle("/debug/cachez", jsonHandler(func(*http.Request) any { return cachez(e.Cache()) }))
}

func jsonHandler(view func(*http.Request) any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(view(r)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}
