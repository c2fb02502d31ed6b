package ingest

import (
	"errors"
	"strings"
)

// Sentinel errors. Every *Error returned by Decode, Validate and
// ValidatePaths wraps exactly one of them, so a caller can tell a broken file
// (keep the last good version of everything in it) from one bad object.
var (
	// ErrSyntax: the document is not well-formed YAML or JSON.
	ErrSyntax = errors.New("syntax error")
	// ErrTypeMeta: the document has no apiVersion or kind, or is not a mapping.
	ErrTypeMeta = errors.New("missing apiVersion or kind")
	// ErrVersion: a kind pilotfish reads, under an API version it does not.
	ErrVersion = errors.New("unsupported API version")
	// ErrSchema: a field is unknown or has the wrong type.
	ErrSchema = errors.New("schema violation")
	// ErrInvalid: the object decodes but breaks a semantic rule.
	ErrInvalid = errors.New("invalid object")
)

// Error is one problem with one document, located as precisely as the input
// allows. Fields left empty are unknown (a YAML syntax error has no Kind).
type Error struct {
	Pos       Position
	Kind      string
	Namespace string
	Name      string
	Field     string // e.g. "spec.http[0].route[1].weight"
	Message   string

	cause error // one of the sentinels above
}

// Error renders "file:line: Kind namespace/name: field.path: message",
// omitting the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.Grow(len(e.Pos.File) + len(e.Kind) + len(e.Namespace) + len(e.Name) + len(e.Field) + len(e.Message) + 16)
	if p := e.Pos.String(); p != "" {
		b.WriteString(p)
		b.WriteString(": ")
	}
	if e.Kind != "" {
		b.WriteString(e.Kind)
		if e.Name != "" {
			b.WriteByte(' ')
			if e.Namespace != "" {
				b.WriteString(e.Namespace)
				b.WriteByte('/')
			}
			b.WriteString(e.Name)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the sentinel the error belongs to, for errors.Is.
func (e *Error) Unwrap() error { return e.cause }
