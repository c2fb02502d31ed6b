package ca

import "errors"

// Sentinel errors. Every error the Authority returns wraps exactly one of
// them, so serve can map it to a gRPC status code without string matching:
//
//	ErrUnauthenticated  → Unauthenticated
//	ErrIdentityMismatch → PermissionDenied
//	ErrInvalidCSR, ErrCSRTooLarge, ErrTTL → InvalidArgument
//	ErrNotReady         → Unavailable
var (
	// ErrUnauthenticated: no authenticator accepted the caller's credentials.
	ErrUnauthenticated = errors.New("ca: caller not authenticated")
	// ErrIdentityMismatch: the CSR asks for an identity (URI, DNS, IP or
	// email SAN) other than the caller's own SPIFFE ID.
	ErrIdentityMismatch = errors.New("ca: CSR asks for an identity the caller does not have")
	// ErrInvalidCSR: the CSR is not PEM, does not parse, has a bad
	// signature, or uses an unsupported key.
	ErrInvalidCSR = errors.New("ca: invalid CSR")
	// ErrCSRTooLarge: the CSR is larger than Options.MaxCSRBytes.
	ErrCSRTooLarge = errors.New("ca: CSR too large")
	// ErrTTL: the requested validity is above Options.MaxTTL.
	ErrTTL = errors.New("ca: requested TTL above the maximum")
	// ErrNotReady: the CA has no usable signing material (none loaded, or
	// its certificate has expired).
	ErrNotReady = errors.New("ca: not ready to sign")
	// ErrInvalidBundle: CA material (cacerts files, a stored self-signed
	// root) is incomplete or inconsistent.
	ErrInvalidBundle = errors.New("ca: invalid CA material")
	// ErrInvalidRule: a JWT rule (JWT_RULE) is malformed.
	ErrInvalidRule = errors.New("ca: invalid JWT rule")
	// ErrNoCredential: an authenticator found no credential of its kind
	// (no client certificate, no bearer token).
	ErrNoCredential = errors.New("ca: no credential of this kind")
	// ErrNotFound: a Store holds no CA material yet.
	ErrNotFound = errors.New("ca: no stored CA material")
	// ErrStoreConflict: another writer (a second replica) stored CA
	// material first; load theirs instead of overwriting it.
	ErrStoreConflict = errors.New("ca: stored CA material changed concurrently")
)
