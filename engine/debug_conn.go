package engine

import (
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// What debug endpoints read of a connection (/debug/config_dump,
// /debug/keyz, /debug/connections). None of it runs on a push path.

// Resources generates typeURL's resources for the connection's proxy, as a
// debug endpoint shows them: like Generate, from the current snapshot, but
// without side effects on the connection (no response memo, no change to
// the gRPC EDS watches). With rec set, every cache key the build looks up
// is reported to it, synchronously (keys are reused by builders: render a
// key inside rec, do not keep it).
func (c *Conn) Resources(typeURL string, names []string, wildcard bool, rec encode.Recorder) ([]Resource, error) {
	sc := c.class.scope(c.e)
	cache := c.e.cache
	if rec != nil {
		cache = cache.Recording(rec)
	}
	return build(typeURL, sc, c.e.meshNow().mesh, cache, names, wildcard, nil)
}

// ConnectedAt is when the proxy connected.
func (c *Conn) ConnectedAt() time.Time { return c.connected }

// Class describes the connection's proxy class, the inputs every proxy of
// the class shares: its type, namespace, version and the other fields of
// encode.ProxyClass.
func (c *Conn) Class() encode.ProxyClass { return c.class.key.class }
