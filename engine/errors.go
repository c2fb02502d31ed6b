package engine

import (
	"errors"

	"github.com/pilotfish-mesh/pilotfish/rules"
)

// Sentinel errors. serve maps them to gRPC status codes.
var (
	// ErrUnknownType: a type URL the engine does not serve.
	ErrUnknownType = rules.ErrUnknownType
	// ErrBadNode: the node ID or metadata cannot be understood.
	ErrBadNode = errors.New("invalid node")
	// ErrShuttingDown: the engine no longer accepts connections.
	ErrShuttingDown = errors.New("shutting down")
)
