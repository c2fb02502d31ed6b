package bench

import (
	"fmt"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// Load decodes and validates manifests and applies them to w as one batch,
// as the file source would. Any decode or validation error fails the load:
// benchmarks must measure the workload they claim to.
func Load(w *index.Writer, manifests []byte) error {
	objs, errs := ingest.Decode("workload.yaml", manifests)
	if len(errs) > 0 {
		return fmt.Errorf("bench: workload: %w (and %d more)", errs[0], len(errs)-1)
	}
	conv := ingest.NewConverter(w, "cluster.local")
	var b index.Batch
	for i := range objs {
		if verrs := ingest.Validate(&objs[i]); len(verrs) > 0 {
			return fmt.Errorf("bench: workload: %w", verrs[0])
		}
		conv.Put(&b, &objs[i])
	}
	w.Apply(&b)
	return nil
}
