package engine

// What the debug package reads of the engine's connections, so that it
// never asserts serve's sessions to *Conn. None of it runs on a push path.

// Conn returns the live connection whose session ID (Conn.ID, serve's
// ConnInfo.ID) is id. It scans the registry: debug endpoints only.
func (e *Engine) Conn(id string) (*Conn, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := range e.conns {
		if c.id == id {
			return c, true
		}
	}
	return nil, false
}

// ConnsByID returns the live connections by session ID, for a debug
// endpoint that looks many of them up at once.
func (e *Engine) ConnsByID() map[string]*Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]*Conn, len(e.conns))
	for c := range e.conns {
		out[c.id] = c
	}
	return out
}
