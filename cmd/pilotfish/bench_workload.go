package main

import (
	"github.com/spf13/cobra"

	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// newBenchWorkloadCommand prints an istio-bench workload, rendered, so that
// `pilotfish serve --config-dir` (the soak, a demo) can serve exactly what
// bench measures.
func newBenchWorkloadCommand() *cobra.Command {
	var p istiobench.Params
	cmd := &cobra.Command{
		Use:   "workload NAME [--services N]",
		Short: "Print an istio-bench workload (http, virtualservice, ...) rendered as YAML",
		Example: `  # istio-bench http at 1,000 services, served from a directory
  mkdir -p /tmp/mesh && pilotfish bench workload http --services 1000 >/tmp/mesh/http.yaml
  pilotfish serve --config-dir /tmp/mesh`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: istiobench.Names(),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := istiobench.Render(args[0], p)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().IntVar(&p.Services, "services", 100, "services of the workload (.Services)")
	cmd.Flags().IntVar(&p.Instances, "instances", 0, "instances of the workload (.Instances; serviceentry-workloadentry only; 0: its default)")
	return cmd
}
