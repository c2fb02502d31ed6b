package loadgen

import "errors"

var (
	// ErrConfig: the Config (or a flag) is invalid.
	ErrConfig = errors.New("loadgen: invalid config")
	// ErrDecode: a response from the server is not a valid protobuf message
	// of the expected shape.
	ErrDecode = errors.New("loadgen: malformed xDS response")
	// ErrChange: the change command or ChangeFunc failed.
	ErrChange = errors.New("loadgen: change failed")
	// ErrIncomplete: Run stopped (Timeout, Duration or a cancelled context)
	// before every proxy had full config, or before every change converged
	// on every proxy. The Report says how far it got.
	ErrIncomplete = errors.New("loadgen: incomplete")
	// ErrMetrics: the server's metrics (Config.ServerMetrics) or its /proc
	// files (Config.ServerPID) could not be read or parsed. A sample that
	// fails is counted in ServerStats.Errors; the run goes on.
	ErrMetrics = errors.New("loadgen: server metrics")
)
