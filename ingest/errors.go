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
	// ErrKind: an API group pilotfish knows (Istio's, Kubernetes') has no
	// kind of that name, most likely a misspelling.
	ErrKind = errors.New("unknown kind")
	// ErrFile: a path named like a manifest that is not read: not a regular
	// file once links are resolved (a FIFO, a device, a dangling link, a
	// link loop), over MaxFileSize, or unreadable.
	ErrFile = errors.New("file not read")
	// ErrIgnored marks a warning, not an error: something pilotfish leaves
	// alone on purpose but that its author likely meant to take effect (a
	// real Istio or Gateway API kind pilotfish does not implement, a
	// symbolic link to a directory). See IsWarning.
	ErrIgnored = errors.New("ignored")
)

// IsWarning reports whether err is a warning (it wraps ErrIgnored): shown
// like an error, but `pilotfish validate` still exits 0 and nothing that
// was applied is held back by it.
func IsWarning(err error) bool { return errors.Is(err, ErrIgnored) }

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
	// unsupported marks a warning of the field ledger (ledger.go): the
	// unsupported field's path without indexes
	// ("spec.tcp[].match[].sourceSubnet"), or unsupportedKind for a kind
	// pilotfish does not implement.
	unsupported string
}

// unsupportedKind marks the warning of a kind pilotfish does not
// implement.
const unsupportedKind = "*"

// Error renders "file:line: Kind namespace/name: field.path: message",
// omitting the parts that are unknown; a warning reads
// "file:line: warning: Kind namespace/name: message", as compilers write
// theirs.
func (e *Error) Error() string {
	var b strings.Builder
	b.Grow(len(e.Pos.File) + len(e.Kind) + len(e.Namespace) + len(e.Name) + len(e.Field) + len(e.Message) + 25)
	if p := e.Pos.String(); p != "" {
		b.WriteString(p)
		b.WriteString(": ")
	}
	if e.cause == ErrIgnored {
		b.WriteString("warning: ")
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
