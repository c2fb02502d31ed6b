// Package engine turns index snapshots and change sets into pushes: it owns
// proxies and their classes, debouncing, the mapping from what changed to who
// is affected, the push queue with per-proxy merging, throttling, and the
// endpoint fast path.
//
// # Imports
//
// engine may import index and encode. It must not import serve (serve drives
// engine, not the other way round), ingest (sources feed the index, engine
// only reads it) or ca.
package engine
