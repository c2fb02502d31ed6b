package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pilotfish-mesh/pilotfish/bench"
)

// newBenchInjectCommand is `pilotfish bench inject`: the sidecar-injection
// load driver (docs/benchmarks.md, "Sidecar injection").
func newBenchInjectCommand() *cobra.Command {
	var (
		o       bench.InjectOptions
		targets []string
		corpus  string
		jsonOut string
	)
	cmd := &cobra.Command{
		Use:   "inject --target NAME=URL@PID [--target ...] [--corpus DIR]",
		Short: "Drive sidecar-injection webhooks with a corpus of Pods and compare their CPU per injection",
		Long: `inject posts AdmissionReviews of a corpus of Pods (inject/testdata/corpus by
default) to each target's injection webhook, --concurrency at a time, and
reads each server's CPU time and RSS from /proc/PID before and after. The
targets take turns round by round, so they share the machine's load. It
prints, per target, CPU per injection, p50/p99 latency and RSS, and each
target's CPU per injection over the first's.

TLS certificates are not verified (loopback load test).`,
		Example: `  pilotfish bench inject --target pilotfish=https://127.0.0.1:15017/inject@$(pidof pilotfish) \
    --target istiod=https://127.0.0.1:25017/inject@$(pidof pilot-discovery) --requests 4200 --rounds 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			for _, t := range targets {
				it, err := parseInjectTarget(t)
				if err != nil {
					return err
				}
				o.Targets = append(o.Targets, it)
			}
			reviews, err := bench.InjectCorpus(corpus)
			if err != nil {
				return err
			}
			o.Reviews = reviews
			res, err := bench.RunInject(ctx, o)
			if err != nil {
				return err
			}
			printInjectResults(cmd.OutOrStdout(), len(reviews), o, res)
			if jsonOut != "" {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&targets, "target", nil, "a webhook to drive, NAME=URL@PID (repeat; the first is the reference of the ratios)")
	f.StringVar(&corpus, "corpus", "inject/testdata/corpus", "directory of Pod and Deployment YAMLs (files ending .istioctl.yaml are skipped)")
	f.IntVar(&o.Concurrency, "concurrency", 100, "requests in flight at once")
	f.IntVar(&o.Requests, "requests", 2000, "requests per target per round")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds (the targets take turns within each)")
	f.IntVar(&o.Warmup, "warmup", 500, "requests per target before measuring")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Second, "one request's deadline")
	f.StringVar(&jsonOut, "json", "", "also write the results as JSON to this file")
	return cmd
}

func parseInjectTarget(s string) (bench.InjectTarget, error) {
	name, rest, ok := strings.Cut(s, "=")
	at := strings.LastIndexByte(rest, '@')
	if !ok || name == "" || at < 0 {
		return bench.InjectTarget{}, fmt.Errorf("--target %q: want NAME=URL@PID", s)
	}
	pid, err := strconv.Atoi(rest[at+1:])
	if err != nil || pid <= 0 {
		return bench.InjectTarget{}, fmt.Errorf("--target %q: PID %q is not a process ID", s, rest[at+1:])
	}
	return bench.InjectTarget{Name: name, URL: rest[:at], PID: pid}, nil
}

func printInjectResults(w io.Writer, corpus int, o bench.InjectOptions, res []bench.InjectResult) {
	fmt.Fprintf(w, "injection load: %d corpus reviews, concurrency %d, %d rounds of %d requests per target\n",
		corpus, o.Concurrency, o.Rounds, o.Requests)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\trequests\tpatched\tallowed\tdenied\terrors\tCPU/injection\tvs first\tp50\tp99\treq/s\tRSS after\t")
	for _, r := range res {
		ratio := "-"
		if res[0].CPUPerRequest > 0 {
			ratio = fmt.Sprintf("%.2fx", float64(r.CPUPerRequest)/float64(res[0].CPUPerRequest))
		}
		rate := 0.0
		if r.Wall > 0 {
			rate = float64(r.Requests) / r.Wall.Seconds()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.0f\t%.1f MiB\t\n", r.Name, r.Requests, r.Patched, r.Allowed,
			r.Denied, r.Errors, r.CPUPerRequest.Round(time.Microsecond), ratio, r.P50.Round(10*time.Microsecond),
			r.P99.Round(10*time.Microsecond), rate, float64(r.RSSAfter)/(1<<20))
	}
	_ = tw.Flush()
	for _, r := range res {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s: first error: %s\n", r.Name, r.FirstError)
		}
	}
}
