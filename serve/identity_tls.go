package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"
)

// CountHandshakeFailures wraps the TLS port's transport credentials so that
// a handshake refused on the client's certificate (expired, from a foreign
// root, otherwise invalid: the server verifies a certificate if one is
// given, as istiod's does) is counted with XDSMetrics.AuthFailed and
// logged. Such a client reaches neither xDS nor the CA, so this is the one
// place that sees it. Other handshake failures (a plaintext client, a
// scanner, a client that does not trust the server) are not identity
// failures and are left to gRPC's own logging.
func CountHandshakeFailures(c credentials.TransportCredentials, m XDSMetrics, log *slog.Logger) credentials.TransportCredentials {
	if m == nil {
		m = NopXDSMetrics{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &countingCreds{TransportCredentials: c, m: m, log: log, limit: newRefusalLimiter()}
}

type countingCreds struct {
	credentials.TransportCredentials
	m     XDSMetrics
	log   *slog.Logger
	limit *logLimiter // log_limit.go: a flood of bad certificates logs a bounded number of lines
}

func (c *countingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		if reason := handshakeReason(err); reason != "" {
			c.m.AuthFailed(reason)
			c.limit.warn(c.log, "TLS client refused: its certificate did not verify", "peer", raw.RemoteAddr().String(), "reason", reason,
				"err", clip(err.Error(), clipShort))
		}
	}
	return conn, info, err
}

func (c *countingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

func (c *countingCreds) Clone() credentials.TransportCredentials {
	return &countingCreds{TransportCredentials: c.TransportCredentials.Clone(), m: c.m, log: c.log, limit: c.limit}
}

// handshakeReason is the AuthFailed reason of a failed server handshake, ""
// when it did not fail on the client's certificate.
func handshakeReason(err error) string {
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		return ""
	}
	var invalid x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(verr.Err, &invalid) && invalid.Reason == x509.Expired:
		return AuthCertExpired
	case errors.As(verr.Err, &unknown):
		return AuthCertUntrusted
	}
	return AuthCertInvalid
}
