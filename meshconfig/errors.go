package meshconfig

import (
	"errors"
	"strconv"
	"strings"
)

var (
	// ErrInvalid: the mesh config does not parse or istiod's validation
	// refuses it.
	ErrInvalid = errors.New("invalid mesh config")
	// ErrUnknownField: a field MeshConfig does not have (istiod ignores
	// it; so does pilotfish, with a warning).
	ErrUnknownField = errors.New("unknown field")
	// ErrNetworksUnsupported: meshNetworks names networks; pilotfish does
	// not support multi-network meshes.
	ErrNetworksUnsupported = errors.New("meshNetworks with networks is not supported by pilotfish (single network only)")
)

// Problem is an error or a warning about one field of a mesh config.
type Problem struct {
	// Field is the field's path in the YAML ("defaultConfig.drainDuration",
	// "trustDomainAliases[1]"); "" for the document as a whole.
	Field string
	// Line is the field's line in the YAML (1-based), 0 when unknown.
	Line    int
	Message string
	cause   error
	value   string // a list element's value, to find its line
}

func (p *Problem) Error() string {
	var b strings.Builder
	if p.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(p.Line))
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

func (p *Problem) Unwrap() error { return p.cause }
