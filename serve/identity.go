package serve

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/engine"
)

// The TLS port's xDS identity rule, istiod's (pilot/pkg/xds/auth.go):
//
//   - Every stream is authenticated before its first request is read: a
//     client certificate verified against the mesh roots, else a bearer
//     token an authenticator accepts (the CA's authenticators, in the CA's
//     order). A stream with neither ends with Unauthenticated.
//   - Its first request's node must be the caller's: the namespace the
//     node claims (metadata NAMESPACE, else the node id's POD.NAMESPACE, the
//     namespace pilotfish selects config by) must equal the identity's, and
//     so must its metadata SERVICE_ACCOUNT when it sends one. A node that
//     claims neither is not checked, as in istiod. Otherwise the stream
//     ends with PermissionDenied naming both. Routers and proxyless gRPC
//     clients follow the same rule: istiod has no exception for them.
//   - The plaintext port (15010) is not authenticated (istiod's default,
//     XDS_AUTH_PLAINTEXT=false): it is for trusted networks only.
//
// Each refusal is logged once and counted (XDSMetrics.AuthFailed) with one
// of the Auth* reasons. TLS handshakes that fail on the client's
// certificate are counted by CountHandshakeFailures.

// Reasons of XDSMetrics.AuthFailed: a fixed set.
const (
	// AuthNoCredential: a TLS stream with neither a client certificate nor
	// a bearer token.
	AuthNoCredential = "no_credential"
	// AuthUnauthenticated: credentials were presented and no authenticator
	// accepted them (a token it refused, a certificate of another trust
	// domain).
	AuthUnauthenticated = "unauthenticated"
	// AuthNamespaceMismatch, AuthServiceAccountMismatch: the node claims
	// another namespace, or another service account, than the caller's.
	AuthNamespaceMismatch      = "namespace_mismatch"
	AuthServiceAccountMismatch = "service_account_mismatch"
	// AuthCertExpired, AuthCertUntrusted, AuthCertInvalid: the TLS
	// handshake refused the client certificate: expired (or not yet
	// valid), not chaining to a mesh root, or invalid otherwise.
	AuthCertExpired   = "cert_expired"
	AuthCertUntrusted = "cert_untrusted"
	AuthCertInvalid   = "cert_invalid"
)

// AuthReasons lists every reason XDSMetrics.AuthFailed reports, so that a
// metrics backend can show each at zero.
var AuthReasons = []string{AuthNoCredential, AuthUnauthenticated, AuthNamespaceMismatch, AuthServiceAccountMismatch,
	AuthCertExpired, AuthCertUntrusted, AuthCertInvalid}

// Authenticator authenticates a TLS caller from the credentials it
// presented. *ca.Authority implements it: its client certificate check
// (verified against the current roots, of its trust domain), then its
// token authenticators.
type Authenticator interface {
	Authenticate(ctx context.Context, c ca.Credentials) (ca.Caller, error)
	TrustDomain() string
}

// AuthOptions are the TLS port's xDS authentication settings.
type AuthOptions struct {
	// Authenticator authenticates every stream. Nil authenticates none
	// (istiod's XDS_AUTH=false): the port then serves anyone who completes
	// the TLS handshake.
	Authenticator Authenticator
	// SkipIdentityCheck serves an authenticated caller whatever node it
	// claims (istiod's PILOT_ENABLE_XDS_IDENTITY_CHECK=false).
	SkipIdentityCheck bool
}

// caller is a stream's authenticated identity and whether its node must
// match it. A nil *caller is a stream that was not authenticated.
type caller struct {
	id    ca.Identity
	check bool
}

// RegisterAuthenticated registers the AggregatedDiscoveryService on gs, the
// TLS port's server, with o's authentication; Register stays the plaintext
// port's. Both serve the same streams' state and registry.
func (s *XDSServer) RegisterAuthenticated(gs grpc.ServiceRegistrar, o AuthOptions) {
	gs.RegisterService(&adsServiceDesc, &authADS{s: s, o: o})
}

// authADS is the TLS port's ADS handler: it authenticates, then serves the
// stream as the plaintext port does.
type authADS struct {
	s *XDSServer
	o AuthOptions
}

func (a *authADS) streamSotW(ss grpc.ServerStream) error {
	c, err := a.authenticate(ss.Context())
	if err != nil {
		return err
	}
	pprof.Do(ss.Context(), pprof.Labels("xds", "sotw"), func(context.Context) {
		err = serveStream(a.s, ss, c, false, newSotW)
	})
	return err
}

func (a *authADS) streamDelta(ss grpc.ServerStream) error {
	c, err := a.authenticate(ss.Context())
	if err != nil {
		return err
	}
	pprof.Do(ss.Context(), pprof.Labels("xds", "delta"), func(context.Context) {
		err = serveStream(a.s, ss, c, true, newDelta)
	})
	return err
}

// authenticate returns the stream's caller, or the Unauthenticated status
// that ends it.
func (a *authADS) authenticate(ctx context.Context) (*caller, error) {
	if a.o.Authenticator == nil {
		return nil, nil
	}
	cr := credentialsFrom(ctx) // ca.go
	who, err := a.o.Authenticator.Authenticate(ctx, cr)
	if err == nil {
		id := ca.Identity{TrustDomain: a.o.Authenticator.TrustDomain(), Namespace: who.Namespace, ServiceAccount: who.ServiceAccount}
		return &caller{id: id, check: !a.o.SkipIdentityCheck}, nil
	}
	reason := AuthUnauthenticated
	if cr.BearerToken == "" && len(cr.PeerCertificates) == 0 {
		reason = AuthNoCredential
	}
	a.s.metrics.AuthFailed(reason)
	msg := clip(err.Error(), clipMessage) // the CA's reasons never quote the token
	a.s.refusals.warn(a.s.log, "xds stream refused: not authenticated", "peer", peerAddr(ctx), "reason", reason, "err", msg)
	if reason == AuthNoCredential {
		return nil, status.Error(codes.Unauthenticated, "authentication failure: the TLS xDS port needs a client certificate from the mesh CA or a bearer token")
	}
	return nil, status.Errorf(codes.Unauthenticated, "authentication failure: %s", msg)
}

// errIdentityMismatch marks a node that is not the caller's.
var errIdentityMismatch = errors.New("node identity does not match the caller")

// authorize checks that node is the caller's (nil: not authenticated, or
// not checked). It returns the PermissionDenied status that ends the
// stream, after logging and counting it once.
func (s *XDSServer) authorize(c *caller, node *corev3.Node, addr string) error {
	if c == nil || !c.check {
		return nil
	}
	ns, sa := claimedIdentity(node)
	reason := ""
	switch {
	case ns != "" && ns != c.id.Namespace:
		reason = AuthNamespaceMismatch
	case sa != "" && sa != c.id.ServiceAccount:
		reason = AuthServiceAccountMismatch
	default:
		return nil
	}
	s.metrics.AuthFailed(reason)
	err := fmt.Errorf("%w: node %s claims namespace %q, service account %q; the caller is %s", errIdentityMismatch,
		clip(node.GetId(), clipShort), clip(ns, clipShort), clip(sa, clipShort), c.id)
	s.refusals.warn(s.log, "xds stream refused: identity mismatch", "peer", addr, "reason", reason, "node", clip(node.GetId(), clipShort),
		"namespace", clip(ns, clipShort), "service_account", clip(sa, clipShort), "identity", c.id.String())
	return status.Errorf(codes.PermissionDenied, "authorization failed: %v", err)
}

// claimedIdentity is the namespace and service account node claims: the
// namespace pilotfish selects its config by (engine.ParseNode: metadata
// NAMESPACE, else the id's POD.NAMESPACE), and metadata SERVICE_ACCOUNT.
// Either may be empty (not claimed).
func claimedIdentity(node *corev3.Node) (ns, sa string) {
	md := node.GetMetadata().GetFields()
	sa = md["SERVICE_ACCOUNT"].GetStringValue()
	ns = md["NAMESPACE"].GetStringValue()
	if ns == "" {
		if n, err := engine.ParseNode(node); err == nil {
			ns = n.Namespace
		}
	}
	return ns, sa
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
