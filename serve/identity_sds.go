package serve

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// PeerIdentity is the SPIFFE identity a stream's TLS client certificate
// proves: only a chain the handshake verified counts (the 15012 server
// verifies a client certificate, if given, against the CA's current roots),
// never a certificate merely presented. Plaintext streams (15010) and TLS
// streams without a client certificate have none; gateway credentials are
// refused to them, as istiod refuses SDS to an unauthenticated proxy.
func PeerIdentity(ctx context.Context) (ca.Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return ca.Identity{}, status.Error(codes.Unauthenticated, "credentials are served only over TLS (15012) with a client certificate from the mesh CA; this stream is plaintext")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return ca.Identity{}, status.Error(codes.Unauthenticated, "credentials are served only to a proxy with a verified client certificate from the mesh CA")
	}
	leaf := ti.State.VerifiedChains[0][0]
	if len(leaf.URIs) != 1 {
		return ca.Identity{}, status.Errorf(codes.Unauthenticated, "client certificate has %d URI SANs, want one SPIFFE ID", len(leaf.URIs))
	}
	id, err := ca.ParseIdentity(leaf.URIs[0])
	if err != nil {
		return ca.Identity{}, status.Errorf(codes.Unauthenticated, "client certificate: %v", err)
	}
	return id, nil
}

// AuthorizeCredential allows a stream to receive the Secrets of namespace
// secretNS only when its verified identity is in that namespace.
func AuthorizeCredential(ctx context.Context, secretNS string) error {
	id, err := PeerIdentity(ctx)
	if err != nil {
		return err
	}
	if id.Namespace != secretNS {
		return status.Errorf(codes.PermissionDenied, "%s may not read credentials of namespace %q", id, secretNS)
	}
	return nil
}

// errCredUnchecked marks a stream whose credential check has not run yet.
var errCredUnchecked = errors.New("credential check not made")

// credentialsAllowed reports whether the stream may receive the gateway
// credentials of its node's namespace: its TLS client certificate, verified
// against the mesh CA, names an identity in that namespace. The check runs
// once per stream (the peer does not change) and a refusal is logged once;
// a refused stream's SDS requests are answered with no resources.
func (c *conn) credentialsAllowed() bool {
	if errors.Is(c.credAuth, errCredUnchecked) {
		c.credAuth = AuthorizeCredential(c.ss.Context(), c.namespace)
		if c.credAuth != nil {
			c.log.Warn("xds credentials refused to this stream", "namespace", c.namespace, "err", c.credAuth)
		}
	}
	return c.credAuth == nil
}
