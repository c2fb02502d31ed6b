package serve

import (
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// istiod serves debug data on the ADS stream under its own type URLs:
// istioctl proxy-status --xds-address asks for istio.io/debug/syncz (one
// envoy.service.status.v3.ClientConfig per connected proxy), and for
// istio.io/debug/config_dump with one resource name, a proxy ID. They are
// answered once per request, outside the xDS state machine: no version is
// tracked, nothing is pushed later, and the ACK that follows is ignored.

// DebugTypePrefix starts every debug type URL.
const DebugTypePrefix = "istio.io/debug/"

// Debug type URLs istiod answers and pilotfish too.
const (
	TypeDebugSyncz      = DebugTypePrefix + "syncz"
	TypeDebugConfigDump = DebugTypePrefix + "config_dump"
)

// DebugSource answers a request for a debug type URL: it returns the
// response's resources (Any holds each one encoded as google.protobuf.Any;
// Name and Version only feed the response's version_info). An error is
// logged and answered with an empty response, as istiod does.
// srv is the server asking, for its Connections.
type DebugSource func(srv *XDSServer, typeURL string, names []string) ([]engine.Resource, error)

// isDebugType reports whether typeURL is one of istiod's debug types.
func isDebugType(typeURL string) bool { return strings.HasPrefix(typeURL, DebugTypePrefix) }

// debugRequest answers a debug type request on a SotW stream. The stream is
// then a tool's, not a proxy's (ConnInfo.Debug).
func (c *conn) debugRequest(req *discoveryv3.DiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	st := c.status
	st.mu.Lock()
	st.debug = true
	if !st.hasTypeLocked(typeURL) && len(st.types) >= maxTypesPerStream {
		st.mu.Unlock()
		return errTooManyTypes // each type answered keeps its nonce (input_limits.go)
	}
	t := st.typeLocked(typeURL)
	ack := t.SentNonce != "" && req.GetResponseNonce() == t.SentNonce
	st.mu.Unlock()
	if ack {
		return nil // the ACK (or NACK) of the answer just sent
	}
	var res []engine.Resource
	if c.srv.debug != nil {
		var err error
		if res, err = c.srv.debug(c.srv, typeURL, req.GetResourceNames()); err != nil {
			first := ""
			if names := req.GetResourceNames(); len(names) > 0 {
				first = clip(names[0], clipShort)
			}
			c.log.Info("xds debug request failed", "type", typeURL, "names", len(req.GetResourceNames()),
				"first", first, "err", clip(err.Error(), clipMessage))
			res = nil
		}
	} else {
		c.log.Debug("xds debug type not served", "type", typeURL)
	}
	h := wireHeader{version: setDigest(res), nonce: c.nextNonce(), typeURL: typeURL, controlPlane: c.srv.controlPlane}
	buf := getBuf(sizeDiscoveryResponse(&h, res))
	*buf = appendDiscoveryResponse(*buf, &h, res)
	c.msg = rawMessage{buf: buf, pool: bufPool}
	if err := c.sendMsg(typeURL, &c.msg); err != nil { // watched like every write (send_watch.go)
		return err
	}
	nonce := string(appendDecimal(nil, h.nonce))
	st.mu.Lock()
	t.SentVersion, t.SentNonce = versionString(h.version), nonce
	st.mu.Unlock()
	return nil
}
