package istiobench

import "errors"

var (
	// ErrUnknownWorkload is returned for a name that Names does not list.
	ErrUnknownWorkload = errors.New("unknown workload")
	// ErrBadParams is returned for negative Params.
	ErrBadParams = errors.New("bad workload parameters")
)
