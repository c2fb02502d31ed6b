package scenario

import (
	"errors"
	"fmt"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// Mesh is the config a scenario applies: manifests decoded, validated and
// converted as the file source does, published to an index writer that the
// target's engine reads.
type Mesh struct {
	W      *index.Writer
	conv   *ingest.Converter
	byFile map[string][]ingest.ObjectKey
}

// NewMesh returns an empty mesh with domain cluster.local.
func NewMesh() *Mesh {
	w := index.NewWriter()
	return &Mesh{W: w, conv: ingest.NewConverter(w, "cluster.local"), byFile: map[string][]ingest.ObjectKey{}}
}

// Apply makes the index hold exactly file's objects in place of what its
// previous apply held, in one published batch. Any decode or validation
// error fails the whole file, naming it.
func (m *Mesh) Apply(file string, data []byte) error {
	objs, errs := ingest.Decode(file, data)
	for i := range objs {
		errs = append(errs, ingest.Validate(&objs[i])...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("scenario: apply %s: %w", file, errors.Join(errs...))
	}
	var b index.Batch
	keep := make(map[ingest.ObjectKey]bool, len(objs))
	keys := make([]ingest.ObjectKey, 0, len(objs))
	for i := range objs {
		m.conv.Put(&b, &objs[i])
		k := objs[i].Key()
		keep[k] = true
		keys = append(keys, k)
	}
	for _, k := range m.byFile[file] {
		if !keep[k] {
			m.conv.Delete(&b, k)
		}
	}
	m.byFile[file] = keys
	m.W.Apply(&b)
	return nil
}

// Delete removes every object of file's last apply.
func (m *Mesh) Delete(file string) error {
	keys, ok := m.byFile[file]
	if !ok {
		return fmt.Errorf("scenario: delete %s: never applied", file)
	}
	var b index.Batch
	for _, k := range keys {
		m.conv.Delete(&b, k)
	}
	delete(m.byFile, file)
	m.W.Apply(&b)
	return nil
}
