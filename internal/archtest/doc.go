// Package archtest holds tests of the repository's architecture: the import
// rules of DESIGN.md, each forbidden edge with the reason it is forbidden.
// It has no non-test code.
package archtest
