package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// Client says where the simulated proxies (loadgen) run.
type Client struct {
	// Command, when set, runs loadgen in a child process: the program and
	// its arguments; the program must call ClientMain (`pilotfish bench
	// client` does, and bench's tests re-run their own binary). The servers
	// then have this process to themselves, so its heap, RSS and CPU time
	// are theirs alone. Nil runs loadgen in this process, where those
	// figures include the clients.
	Command []string
	// Env is added to the child's environment.
	Env []string
}

func (c Client) inProcess() bool { return len(c.Command) == 0 }

// runConfig is one loadgen run, as sent to the child.
type runConfig struct {
	XDS            string        `json:"xds"`
	Proxies        int           `json:"proxies"`
	Changes        int           `json:"changes"`
	ChangeInterval time.Duration `json:"change_interval"`
	ChangeTimeout  time.Duration `json:"change_timeout"`
	Timeout        time.Duration `json:"timeout"`
	Expect         string        `json:"expect,omitempty"`
	Mode           string        `json:"mode,omitempty"`      // loadgen.Mode: "" is SotW
	Transport      string        `json:"transport,omitempty"` // loadgen.Config.Transport: "" is grpc
	Progress       bool          `json:"progress,omitempty"`
}

func (rc runConfig) loadgen() loadgen.Config {
	return loadgen.Config{
		XDS:            rc.XDS,
		Proxies:        rc.Proxies,
		Changes:        rc.Changes,
		ChangeInterval: rc.ChangeInterval,
		ChangeTimeout:  rc.ChangeTimeout,
		Timeout:        rc.Timeout,
		ExpectResource: rc.Expect,
		Mode:           loadgen.Mode(rc.Mode),
		Transport:      rc.Transport,
	}
}

// changeFunc makes change i (1-based), which loadgen started at requested,
// and returns when the change itself began: any work before that (a memory
// measurement, the hop to this process) is not the change's and is taken
// out of its convergence.
type changeFunc func(i int, requested time.Time) (began time.Time, err error)

// run runs loadgen once, calling fn for each change. offsets[i-1] is how
// long after loadgen started change i the change itself began.
func (c Client) run(ctx context.Context, rc runConfig, progress io.Writer, fn changeFunc) (*loadgen.Report, []time.Duration, error) {
	var offsets []time.Duration
	var mu sync.Mutex
	note := func(requested, began time.Time) {
		mu.Lock()
		offsets = append(offsets, max(began.Sub(requested), 0))
		mu.Unlock()
	}
	if c.inProcess() {
		cfg := rc.loadgen()
		i := 0
		cfg.ChangeFunc = func(context.Context) error {
			i++
			requested := time.Now()
			began, err := fn(i, requested)
			note(requested, began)
			return err
		}
		if rc.Progress && progress != nil {
			cfg.Progress = progress
		}
		rep, err := loadgen.Run(ctx, cfg)
		return rep, offsets, err
	}
	rep, err := c.runChild(ctx, rc, progress, func(i int, requested time.Time) (time.Time, error) {
		began, err := fn(i, requested)
		note(requested, began)
		return began, err
	})
	return rep, offsets, err
}

// Messages between the bench process and its client child, one JSON value
// per line: the parent sends a runConfig, then a reply per change; the child
// sends a request per change, then its report.
type (
	childRequest struct {
		Change int   `json:"change,omitempty"`
		WallNS int64 `json:"wall_ns,omitempty"` // when loadgen started the change
		// The final message:
		Report *loadgen.Report `json:"report,omitempty"`
		Err    string          `json:"err,omitempty"`
		Done   bool            `json:"done,omitempty"`
	}
	childReply struct {
		Err string `json:"err,omitempty"`
	}
)

func (c Client) runChild(ctx context.Context, rc runConfig, progress io.Writer, fn changeFunc) (*loadgen.Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tail := &tailWriter{max: 4096}
	cmd.Stderr = tail
	if progress != nil && rc.Progress {
		cmd.Stderr = io.MultiWriter(tail, progress)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the client %q: %w", c.Command[0], err)
	}
	fail := func(err error) (*loadgen.Report, error) {
		cancel()
		_ = cmd.Wait()
		if t := tail.String(); t != "" {
			err = fmt.Errorf("%w; client stderr: %s", err, t)
		}
		return nil, err
	}
	enc := json.NewEncoder(stdin)
	if err := enc.Encode(rc); err != nil {
		return fail(fmt.Errorf("bench: client: %w", err))
	}
	dec := json.NewDecoder(bufio.NewReader(stdout))
	for {
		var req childRequest
		if err := dec.Decode(&req); err != nil {
			return fail(fmt.Errorf("bench: client ended without a report: %w", err))
		}
		if req.Done {
			_ = stdin.Close()
			if err := cmd.Wait(); err != nil {
				return req.Report, fmt.Errorf("bench: client: %w", err)
			}
			if req.Err != "" {
				return req.Report, errors.New(req.Err)
			}
			return req.Report, nil
		}
		_, err := fn(req.Change, time.Unix(0, req.WallNS))
		var reply childReply
		if err != nil {
			reply.Err = err.Error()
		}
		if err := enc.Encode(reply); err != nil {
			return fail(fmt.Errorf("bench: client: %w", err))
		}
	}
}

// ClientMain is the client child's side of the protocol: it reads a run's
// configuration from stdin, runs loadgen, asks the parent (over stdout and
// stdin) to make each change, and writes loadgen's report to stdout.
func ClientMain(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(stdin))
	enc := json.NewEncoder(stdout)
	var rc runConfig
	if err := dec.Decode(&rc); err != nil {
		return fmt.Errorf("bench client: reading the run: %w", err)
	}
	cfg := rc.loadgen()
	if rc.Progress {
		cfg.Progress = stderr
	}
	i := 0
	cfg.ChangeFunc = func(context.Context) error {
		i++
		if err := enc.Encode(childRequest{Change: i, WallNS: time.Now().UnixNano()}); err != nil {
			return err
		}
		var reply childReply
		if err := dec.Decode(&reply); err != nil {
			return fmt.Errorf("bench client: reading the change reply: %w", err)
		}
		if reply.Err != "" {
			return errors.New(reply.Err)
		}
		return nil
	}
	rep, err := loadgen.Run(ctx, cfg)
	final := childRequest{Done: true, Report: rep}
	if err != nil {
		final.Err = err.Error()
	}
	return enc.Encode(final)
}

// tailWriter keeps the last max bytes written.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
