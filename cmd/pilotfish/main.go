// Command pilotfish is the one pilotfish binary: `serve` runs the control
// plane, `validate` checks manifests, `version` prints the build. All wiring
// of packages happens here.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(exitCode(err))
	}
}
