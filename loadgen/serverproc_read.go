package loadgen

// ReadProc returns process pid's CPU time (user plus system, seconds) and
// resident set (bytes) from Linux's /proc, as Run reads a server's with
// Config.ServerPID; other drivers (bench's injection load) share it.
func ReadProc(pid int) (cpuSeconds float64, rss int64, err error) { return readProc(pid) }
