package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

func newValidateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check Kubernetes and Istio manifests the way istiod would",
		Long: `validate decodes and validates manifests before they reach a mesh: the
Kubernetes objects pilotfish reads (Service, EndpointSlice, Pod, Namespace)
and Istio's networking and security config (VirtualService, DestinationRule,
Gateway, ServiceEntry, WorkloadEntry, Sidecar, AuthorizationPolicy,
PeerAuthentication, RequestAuthentication), in any accepted API version.

Directories are read recursively for .yaml, .yml and .json files; a file
named explicitly is read whatever its extension. Documents of other kinds
(ConfigMaps, Deployments, ...) are skipped.

Each problem is printed to stderr on its own line as
  file:line: Kind namespace/name: field.path: message
and a summary ("N objects, M errors") to stdout. The exit status is 1 if
there is any error, 0 otherwise.`,
		Example: `  # Check one file
  pilotfish validate reviews-vs.yaml

  # Check a config directory and a JSON export before applying them
  pilotfish validate ./mesh-config/ istio-export.json

  # In CI: fail the job on the first bad manifest
  pilotfish validate deploy/ || exit 1`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			report, err := ingest.ValidatePaths(args...)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			for _, e := range report.Errors {
				fmt.Fprintln(cmd.ErrOrStderr(), e)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s, %s\n",
				plural(len(report.Objects), "object"), plural(len(report.Errors), "error"))
			if len(report.Errors) > 0 {
				return &exitError{code: 1, err: errors.New("validation failed")}
			}
			return nil
		},
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
