package ca

import (
	"context"
	"crypto/x509"
)

// Credentials are what a caller presented, extracted from the transport by
// serve: ca knows nothing about gRPC.
type Credentials struct {
	// BearerToken is the token of the first "authorization: Bearer ..."
	// metadata value, or empty.
	BearerToken string
	// PeerCertificates are the client certificates presented over mTLS,
	// leaf first, as received (not necessarily verified); nil on a
	// plaintext connection.
	PeerCertificates []*x509.Certificate
}

// Caller is an authenticated workload: a Kubernetes service account.
type Caller struct {
	Namespace      string
	ServiceAccount string
	// Source names the authenticator that accepted the caller.
	Source string
}

// Authenticator checks one kind of credential. Authenticate returns the
// caller, or an error saying why the credentials were not accepted
// (ErrNoCredential when this authenticator found nothing to check). It is
// called concurrently.
type Authenticator interface {
	Name() string
	Authenticate(ctx context.Context, c Credentials) (Caller, error)
}
