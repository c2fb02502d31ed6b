package kubetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// process is one child process with its output in a log file.
type process struct {
	name string
	path string
	args []string
	log  string // path of the output file, appended to across restarts
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// start runs p; its output is appended to p.log.
func (p *process) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	setParentDeath(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return nil
}

// exited reports whether the process has exited (it should not have).
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop terminates the process: SIGTERM, then SIGKILL after 10 s.
func (p *process) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// logTail logs the last lines of p's output when t failed.
func (p *process) logTail(t testing.TB) {
	if !t.Failed() {
		return
	}
	b, err := os.ReadFile(p.log)
	if err != nil {
		return
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	const keep = 60
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	t.Logf("kubetest: last %d lines of %s (%s):\n%s", len(lines), p.name, filepath.Base(p.log), bytes.Join(lines, []byte("\n")))
}
