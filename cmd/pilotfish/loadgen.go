package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// loadgenOptions are the flags of `pilotfish loadgen`.
type loadgenOptions struct {
	cfg       loadgen.Config
	typ       string
	mode      string
	decode    string
	ipBase    string
	jsonFile  string
	htmlFile  string
	pprofAddr string
	quiet     bool
	logLevel  string
	labels    map[string]string
	progressW io.Writer // stderr unless set by a test
	tty       *bool     // nil: detect
}

func newLoadgenCommand() *cobra.Command {
	o := &loadgenOptions{}
	cmd := &cobra.Command{
		Use:   "loadgen --xds ADDR --proxies N",
		Short: "Simulate thousands of Envoys against an xDS server and measure config latency",
		Long: `loadgen connects N simulated proxies to an ADS server (pilotfish, istiod, a
go-control-plane server), each subscribing the way Envoy does (CDS and LDS
wildcard, then EDS and RDS by the names they reference, every response ACKed)
or, with --type grpc, the way a proxyless gRPC client does. It measures the
time each proxy takes to full config and, when --change-cmd is given, how long
a change takes to reach every proxy (convergence), with push counts, bytes
and resources per type.

Node IDs and metadata follow istio-agent's conventions: proxy I is
sidecar~IP~pod-I.NS~NS.svc.cluster.local with IP = --ip-base + 1 + I,
NS = PREFIX-(I mod --namespaces), app=load-(I mod --apps).

A change: once every proxy has full config, loadgen runs --change-cmd (sh -c,
LOADGEN_CHANGE=i in its environment, {i} replaced), --changes times. With
--expect-resource TYPE/NAME a proxy has converged when it holds NAME (or, with
!TYPE/NAME, no longer holds it) with full config; without it, on any version
bump. The run ends when everything is measured, or after --duration.

The report goes to stdout as tables, to --json (field names documented in
package loadgen's Report) and to --html (a self-contained page with charts).
With --server-metrics or --server-pid, the server under test is sampled
during the run and its CPU, RSS and pushes are reported next to loadgen's.

A NACKed response counts as delivered: the proxy has been answered and keeps
what it had, and the server does not resend it (--nack-rate).
The exit code is 1 when a proxy never reached full config or a change did not
converge everywhere.`,
		Example: `  # 2,000 sidecars against a local pilotfish, 100 new connections per second
  pilotfish loadgen --xds 127.0.0.1:15010 --proxies 2000 --ramp 100

  # Convergence of adding a ServiceEntry, measured 3 times, as a report
  pilotfish loadgen --xds istiod.istio-system:15010 --proxies 1000 \
    --change-cmd 'kubectl apply -f se-{i}.yaml' --changes 3 \
    --expect-resource 'cds/outbound|80||new-{i}.example.com' --html report.html

  # Proxyless gRPC clients over Delta xDS
  pilotfish loadgen --xds 127.0.0.1:15010 --proxies 500 --type grpc --mode delta \
    --grpc-targets reviews.shop.svc.cluster.local:9080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runLoadgen(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	c := &o.cfg
	f.StringVar(&c.XDS, "xds", "", "address of the ADS server, host:port, plaintext gRPC (required)")
	f.IntVar(&c.Proxies, "proxies", 1, "number of simulated proxies")
	f.StringVar(&o.typ, "type", "sidecar", "proxy type: sidecar, router or grpc")
	f.StringVar(&o.mode, "mode", "sotw", "xDS protocol variant: sotw or delta")
	f.IntVar(&c.StreamsPerConn, "streams-per-conn", 1, "proxies multiplexed on one gRPC connection")
	f.StringVar(&c.Transport, "transport", loadgen.TransportGRPC, "client transport: grpc (grpc-go) or h2c (loadgen's own HTTP/2: one stream per connection, read and written by the proxy's goroutine)")
	f.IntVar(&c.Namespaces, "namespaces", 1, "spread proxies over this many namespaces")
	f.StringVar(&c.NamespacePrefix, "namespace-prefix", "load", "namespaces are PREFIX-0, PREFIX-1, ...")
	f.IntVar(&c.Apps, "apps", 1, "spread proxies over this many app labels (app=load-I)")
	f.StringToStringVar(&o.labels, "labels", nil, "extra labels of every proxy, k=v,... (routers get istio=ingressgateway)")
	f.StringVar(&o.ipBase, "ip-base", "10.10.0.0", "proxy I gets IP base+1+I")
	f.StringSliceVar(&c.GRPCTargets, "grpc-targets", nil, "listeners (host:port) that --type grpc proxies request")
	f.Float64Var(&c.Ramp, "ramp", 0, "connect this many proxies per second (0: all at once)")
	f.DurationVar(&c.Duration, "duration", 0, "stop after this long (0: when full config and every change are measured)")
	f.DurationVar(&c.Timeout, "timeout", 0, "give up waiting for full config or convergence after this long (0: never)")
	f.Float64Var(&c.NackRate, "nack-rate", 0, "fraction of responses to NACK (the next one of a type is always ACKed)")
	f.IntVar(&c.StalledProxies, "stall-proxies", 0, "this many proxies stop reading their stream once they have full config, keeping it open (left out of the figures)")
	f.IntVar(&c.NackingProxies, "nack-proxies", 0, "this many proxies NACK every response (left out of the figures; the report counts what they receive per change)")
	f.Uint64Var(&c.Seed, "seed", 1, "seed of the random NACK choices")
	f.StringVar(&o.decode, "decode", "lazy", "lazy: walk the wire format for names; full: unmarshal and ValidateAll every resource")
	f.StringVar(&c.ChangeCmd, "change-cmd", "", "shell command making a change, run once every proxy has full config")
	f.IntVar(&c.Changes, "changes", 0, "how many times to run --change-cmd (default 1 with --change-cmd)")
	f.DurationVar(&c.ChangeInterval, "change-interval", time.Second, "pause before each change")
	f.DurationVar(&c.ChangeTimeout, "change-timeout", 2*time.Minute, "give up on a change's convergence after this long")
	f.StringVar(&c.ExpectResource, "expect-resource", "", "[!]TYPE/NAME that shows a proxy has the change (TYPE cds, eds, lds or rds; {i} replaced)")
	f.StringVar(&c.ServerMetrics, "server-metrics", "", "URL of the server's Prometheus metrics (e.g. http://127.0.0.1:15014/metrics): its pushes, rejects, heap, CPU and RSS are sampled and charted next to loadgen's")
	f.IntVar(&c.ServerPID, "server-pid", 0, "PID of the server (Linux): its CPU and RSS are read from /proc/PID/stat and status during the run")
	f.DurationVar(&c.ServerSampleInterval, "server-sample-interval", time.Second, "time between samples of the server (--server-metrics, --server-pid)")
	f.StringVar(&o.jsonFile, "json", "", "write the report as JSON to this file")
	f.StringVar(&o.htmlFile, "html", "", "write the report as a self-contained HTML page to this file")
	f.BoolVar(&o.quiet, "quiet", false, "no progress output on stderr")
	f.StringVar(&o.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn or error")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "serve loadgen's own /debug/pprof/ on this address during the run (e.g. 127.0.0.1:6061)")
	return cmd
}

// runLoadgen runs loadgen with o and writes its reports.
func runLoadgen(ctx context.Context, o *loadgenOptions, stdout, stderr io.Writer) error {
	cfg := o.cfg
	cfg.Type = loadgen.ProxyType(o.typ)
	cfg.Mode = loadgen.Mode(o.mode)
	cfg.Decode = loadgen.Decode(o.decode)
	cfg.Labels = o.labels
	ip, err := netip.ParseAddr(o.ipBase)
	if err != nil {
		return fmt.Errorf("--ip-base %q: %w", o.ipBase, err)
	}
	cfg.IPBase = ip
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if !o.quiet {
		cfg.Progress = stderr
		if o.progressW != nil {
			cfg.Progress = o.progressW
		}
		if o.tty != nil {
			cfg.ProgressTTY = *o.tty
		} else {
			cfg.ProgressTTY = isTerminal(cfg.Progress)
		}
	}

	stopPprof, err := startLoadgenPprof(o.pprofAddr, cfg.Logger)
	if err != nil {
		return err
	}
	defer stopPprof()
	rep, runErr := loadgen.Run(ctx, cfg)
	if rep == nil {
		return runErr
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if o.jsonFile != "" {
		if err := writeFile(o.jsonFile, rep.WriteJSON); err != nil {
			return err
		}
	}
	if o.htmlFile != "" {
		if err := writeFile(o.htmlFile, rep.WriteHTML); err != nil {
			return err
		}
	}
	if runErr != nil {
		if errors.Is(runErr, loadgen.ErrIncomplete) || errors.Is(runErr, loadgen.ErrChange) {
			return &exitError{code: 1, err: runErr}
		}
		return runErr
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Stat() (os.FileInfo, error) }) // an *os.File
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	return f.Close()
}
