// Package testcert makes throwaway certificates for tests: a self-signed
// certificate and its key, PEM-encoded, as gateway credential Secrets hold
// them. It is imported by tests only and must not be imported by
// production code.
package testcert
