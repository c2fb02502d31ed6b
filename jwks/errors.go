package jwks

import "errors"

var (
	// ErrTooLarge: a response body is larger than Options.MaxBytes.
	ErrTooLarge = errors.New("jwks: response too large")
	// ErrStatus: the server answered with a status other than 2xx.
	ErrStatus = errors.New("jwks: unexpected HTTP status")
	// ErrScheme: a URI is not http or https.
	ErrScheme = errors.New("jwks: URI scheme is not http or https")
	// ErrKeySet: a body is not a JSON Web Key Set.
	ErrKeySet = errors.New("jwks: not a JSON Web Key Set")
	// ErrDiscovery: an OpenID discovery document has no usable jwks_uri.
	ErrDiscovery = errors.New("jwks: invalid OpenID discovery document")
	// ErrBlocked: the server's address is in a blocked CIDR.
	ErrBlocked = errors.New("jwks: address is blocked")
)
