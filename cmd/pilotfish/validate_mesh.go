package main

import (
	"os"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// validateMesh checks the mesh configs among paths (each ConfigMap istio
// in their YAML files; serve reads the first of a --config-dir) and the
// --mesh-config files as serve reads them, adding their errors and
// warnings (unknown and unsupported fields) to r. It returns how many
// mesh configs it read.
func validateMesh(r *ingest.Report, paths, meshFiles []string) (int, error) {
	var inputs []meshInput
	for _, f := range meshFiles {
		if _, err := os.Stat(f); err != nil {
			return 0, err
		}
		in := readMeshFile(f)
		in.file = f
		inputs = append(inputs, in)
	}
	for _, p := range paths {
		inputs = append(inputs, scanConfigMaps(p, meshConfigMap, true)...)
	}
	for _, in := range inputs {
		_, problems, _ := parseMeshInput(in)
		for _, p := range problems {
			if ingest.IsWarning(p) {
				r.Warnings = append(r.Warnings, p)
			} else {
				r.Errors = append(r.Errors, p)
			}
		}
	}
	return len(inputs), nil
}
