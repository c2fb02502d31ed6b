package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pilotfish-mesh/pilotfish/bench"
	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// benchOptions are the flags of `pilotfish bench`.
type benchOptions struct {
	o         bench.Options
	jsonFile  string
	client    string
	quiet     bool
	mode      string
	clientCmd []string // the child client's command line; nil: this binary's `bench client`
}

func newBenchCommand() *cobra.Command {
	bo := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [--scenario NAME] [--workload http] [--services N] [--proxies N] [--json FILE]",
		Short: "Run fixed scenarios against pilotfish and go-control-plane baselines and print ratios",
		Long: `bench serves a workload three ways in this process, one after the other, on
127.0.0.1: pilotfish (index, engine and ADS server, wired as serve wires them),
go-control-plane's SnapshotCache (one snapshot for every node) and its
LinearCache (one per type, behind a MuxCache). The baselines serve exactly the
resources pilotfish generates for the simulated proxies. --server floor adds a
fourth, on request only: an ADS server on pilotfish's gRPC settings that does
nothing per proxy but write pre-encoded responses and read requests, the floor
of what gRPC-go and the kernel cost. Against each, loadgen's
simulated sidecars (in a child process, so the server's CPU and heap are its own)
run the scenarios:

  connect    every proxy connects at once: time until all have full config
  change     a service is added (pilotfish: a ServiceEntry through its config
             input; baselines: the CDS, EDS and RDS changes, published as a
             control plane would): convergence p50/p99/max
  churn      endpoint changes at --churn-rate for --churn-duration: EDS
             convergence
  reconnect  every connection is cut at once: time to full config again
  memory     server heap (and stacks, RSS) per idle connected proxy

The table shows each server's numbers and pilotfish's over each baseline's
(below 1: pilotfish is faster or smaller). Times vary with the machine's load;
compare ratios from one run, not absolute times across runs.`,
		Example: `  # Every scenario, istio-bench http at 1,000 services, 1,000 proxies
  pilotfish bench --services 1000 --proxies 1000

  # Config change convergence only, as JSON
  pilotfish bench --scenario change --workload virtualservice --json out.json

  # Endpoint churn, pilotfish against the floor of gRPC and the kernel
  pilotfish bench --scenario churn --mode delta --server pilotfish,floor

  # The example mesh (run from the repository root)
  pilotfish bench --workload examples --proxies 500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBench(ctx, bo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o := &bo.o
	f.StringSliceVar(&o.Scenarios, "scenario", nil, "scenarios to run, repeated or comma separated: connect, change, churn, reconnect, memory (default all)")
	f.StringSliceVar(&o.Servers, "server", nil, "servers to run against: pilotfish, snapshot, linear, floor (default pilotfish, snapshot, linear)")
	f.StringVar(&o.Workload, "workload", "http", "istio-bench workload name (http, virtualservice, ...) or a directory of manifests (examples)")
	f.IntVar(&o.Services, "services", 100, "services of an istio-bench workload")
	f.IntVar(&o.Proxies, "proxies", 200, "simulated sidecars")
	f.StringVar(&bo.mode, "mode", "sotw", "xDS variant of the simulated proxies, with every server: sotw or delta")
	f.StringVar(&o.Transport, "transport", loadgen.TransportGRPC, "the simulated proxies' gRPC transport: grpc (grpc-go) or h2c (loadgen's own, less client CPU per push; see pilotfish loadgen --help)")
	f.IntVar(&o.Changes, "changes", 3, "services added one after the other (change)")
	f.Float64Var(&o.ChurnRate, "churn-rate", 10, "endpoint changes per second (churn; each waits for the previous to converge)")
	f.DurationVar(&o.ChurnDuration, "churn-duration", 3*time.Second, "how long the churn lasts")
	f.DurationVar(&o.Debounce, "debounce", time.Millisecond, "pilotfish's debounce (the baselines have none; istiod's default is 100ms)")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "bound on each loadgen run")
	f.DurationVar(&o.ChangeTimeout, "change-timeout", 2*time.Minute, "bound on each change's convergence")
	f.StringVar(&bo.client, "client", "process", "where the simulated proxies run: process (a child process) or inprocess")
	f.StringVar(&bo.jsonFile, "json", "", "also write the result as JSON to this file")
	f.BoolVar(&bo.quiet, "quiet", false, "no progress on stderr")
	f.StringVar(&o.ProfileDir, "profile-dir", "", "write CPU profiles of each server's runs and heap profiles of idle servers here")
	cmd.AddCommand(newBenchClientCommand(), newBenchWorkloadCommand(), newBenchInjectCommand())
	return cmd
}

// newBenchClientCommand is the child side of --client process.
func newBenchClientCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "client",
		Short:  "Run loadgen for a parent `pilotfish bench` (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ClientMain(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// runBench runs the scenarios and writes the table (and JSON).
func runBench(ctx context.Context, bo *benchOptions, stdout, stderr io.Writer) error {
	o := bo.o
	switch bo.mode {
	case "sotw", "delta":
		o.Mode = loadgen.Mode(bo.mode)
	default:
		return fmt.Errorf("--mode %q: want sotw or delta", bo.mode)
	}
	switch bo.client {
	case "process":
		argv := bo.clientCmd
		if argv == nil {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("--client process: %w", err)
			}
			argv = []string{exe, "bench", "client"}
		}
		o.Client = bench.Client{Command: argv}
	case "inprocess":
	default:
		return fmt.Errorf("--client %q: want process or inprocess", bo.client)
	}
	if !bo.quiet {
		o.Progress = stderr
	}
	res, runErr := bench.Run(ctx, o)
	if res == nil {
		return runErr
	}
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	if bo.jsonFile != "" {
		if err := writeBenchJSON(bo.jsonFile, res); err != nil {
			return err
		}
	}
	if runErr != nil {
		return &exitError{code: 1, err: runErr}
	}
	return nil
}

func writeBenchJSON(name string, res *bench.Result) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	err = res.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("--json %s", name), err)
	}
	return nil
}
