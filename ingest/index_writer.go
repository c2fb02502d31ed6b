package ingest

import "github.com/pilotfish-mesh/pilotfish/index"

// NewIndexWriter returns an empty index for sources to write: ingest is
// the index's only writer, so the wiring gets its writer here (cmd imports
// no index). Hand it to NewFileSource and NewKubeSource, and to the engine
// as its engine.Index.
func NewIndexWriter() *index.Writer { return index.NewWriter() }
