// Package archtest holds tests of the repository's architecture: the import
// rules of DESIGN.md, each forbidden edge with the reason it is forbidden,
// checked on every Go file, tests included (imports_test.go); and the rule
// that encode names nothing of index but its row types, checked on the
// identifiers it uses (encode_index_test.go). It has no non-test code.
package archtest
