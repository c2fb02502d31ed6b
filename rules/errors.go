package rules

import "errors"

// ErrUnknownType: a type URL no builder serves (engine.ErrUnknownType is
// this error).
var ErrUnknownType = errors.New("unknown xDS type")
