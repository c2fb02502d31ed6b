//go:build !unix

package ingest

// openNonblock: no such flag here; the stat before opening is the guard.
const openNonblock = 0
