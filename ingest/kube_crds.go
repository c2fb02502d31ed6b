package ingest

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// crdWatch starts the informer of an Istio kind once the API server serves
// its resource and stops it (deleting its objects) once it no longer does,
// by polling discovery: Istio's CRDs may be installed after pilotfish
// starts, or never (core-only mode).
type crdWatch struct {
	s *KubeSource
	// loggedAbsent: core-only mode was logged (once, not at every poll).
	loggedAbsent bool
}

func newCRDWatch(s *KubeSource) *crdWatch { return &crdWatch{s: s} }

// poll compares discovery with the running informers. A discovery error
// other than "not found" (the API server is restarting) changes nothing.
func (c *crdWatch) poll(ctx context.Context) {
	s := c.s
	if s.opts.Istio == nil {
		return
	}
	served := map[string]map[string]bool{}
	for _, gv := range istioGroupVersions {
		list, err := s.opts.Client.Discovery().ServerResourcesForGroupVersion(gv)
		switch {
		case apierrors.IsNotFound(err):
			served[gv] = map[string]bool{}
		case err != nil:
			s.log.Debug("discovery failed; Istio kinds unchanged", "group-version", gv, "err", err)
			return
		default:
			served[gv] = map[string]bool{}
			for _, r := range list.APIResources {
				if !strings.Contains(r.Name, "/") { // not a subresource such as virtualservices/status
					served[gv][r.Name] = true
				}
			}
		}
	}
	var started, stopped []string
	for _, ik := range istioKinds {
		s.mu.Lock()
		_, running := s.running[ik.kind]
		s.mu.Unlock()
		switch on := served[ik.groupVersion][ik.resource]; {
		case on && !running:
			s.start(ctx, ik.kind, ik.newInformer(s.opts.Istio), transformRevision(s.opts.Revision))
			started = append(started, ik.kind.String())
		case !on && running:
			s.stop(ik.kind)
			stopped = append(stopped, ik.kind.String())
		}
	}
	switch {
	case len(started) > 0:
		s.log.Info("watching Istio kinds", "kinds", started)
		c.loggedAbsent = false
	case c.served() == 0 && !c.loggedAbsent:
		s.log.Info("Istio CRDs are not installed: serving Kubernetes services only until they are",
			"group-versions", istioGroupVersions)
		c.loggedAbsent = true
	}
	if len(stopped) > 0 {
		s.log.Warn("Istio CRDs removed: their objects are deleted", "kinds", stopped)
	}
}

// served counts the Istio kinds being watched.
func (c *crdWatch) served() int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	n := 0
	for k := range c.s.running {
		if k != KindUnknown && kinds[k].istio() {
			n++
		}
	}
	return n
}
