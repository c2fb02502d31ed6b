package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra (validate exits 1 on
// invalid input without printing usage).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "pilotfish",
		Short: "pilotfish is an Istio-compatible, performance-first xDS control plane",
		Long: `pilotfish reads a mesh's configuration (Kubernetes Services, EndpointSlices,
Pods, Namespaces and Istio's CRDs), translates it into Envoy xDS and streams it to
every proxy, like istiod, at a fraction of the cost.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version, // --version; the template prints versionLine
	}
	root.SetVersionTemplate(versionLine() + "\n")
	root.AddCommand(newServeCommand())
	root.AddCommand(newValidateCommand())
	root.AddCommand(newLoadgenCommand())
	root.AddCommand(newBenchCommand())
	root.AddCommand(newProxyStatusCommand())
	root.AddCommand(newVersionCommand())
	return root
}
