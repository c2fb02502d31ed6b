package loadgen

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
)

// The server's CPU and RSS from Linux's /proc (Config.ServerPID): the
// process's user and system time from /proc/PID/stat and its resident set
// from VmRSS in /proc/PID/status. Elsewhere reading fails, and Run rejects
// the PID.

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go supports (the kernel scales to it whatever its HZ).
const userHZ = 100

// readProc returns pid's CPU time in seconds and RSS in bytes.
func readProc(pid int) (cpuSeconds float64, rss int64, err error) {
	stat, err := readSmall(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	status, err := readSmall(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	if cpuSeconds, err = parseProcStat(stat); err != nil {
		return 0, 0, fmt.Errorf("%w: /proc/%d/stat: %v", ErrMetrics, pid, err)
	}
	if rss, err = parseProcRSS(status); err != nil {
		return 0, 0, fmt.Errorf("%w: /proc/%d/status: %v", ErrMetrics, pid, err)
	}
	return cpuSeconds, rss, nil
}

// readSmall reads a /proc file of at most 64 KiB.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetrics, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetrics, err)
	}
	return b, nil
}

// parseProcStat returns utime+stime of a /proc/PID/stat line in seconds.
// The command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted from the last ')'.
func parseProcStat(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errString("no command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errString("too few fields")
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errString("bad utime or stime")
	}
	return float64(utime+stime) / userHZ, nil
}

// parseProcRSS returns VmRSS of /proc/PID/status in bytes.
func parseProcRSS(b []byte) (int64, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, errString("bad VmRSS line")
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0, errString("bad VmRSS value")
		}
		return kb << 10, nil
	}
	return 0, errString("no VmRSS (a kernel thread, or not Linux)")
}
