package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/debug"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// `pilotfish proxy-status`: istioctl proxy-status for pilotfish. It reads
// the sync status from /debug/syncz on the HTTP port, or over xDS as
// istioctl does (istio.io/debug/syncz), and prints istioctl's table.

type proxyStatusOptions struct {
	httpAddr  string
	xdsAddr   string
	namespace string
	output    string
	timeout   time.Duration
}

func newProxyStatusCommand() *cobra.Command {
	o := &proxyStatusOptions{}
	cmd := &cobra.Command{
		Use:     "proxy-status",
		Aliases: []string{"ps"},
		Short:   "Print the xDS sync status of every proxy connected to a pilotfish replica",
		Long: `proxy-status prints, like istioctl proxy-status, one line per proxy connected to
a pilotfish replica and, per xDS type (CDS, LDS, EDS, RDS, ECDS), whether the
proxy has the last config sent to it:

  SYNCED    the proxy acknowledged the last response sent (age of that response)
  STALE     a response was sent and not acknowledged yet
  ERROR     the proxy rejected (NACKed) the last response; it keeps its last good config
  NOT SENT  the proxy subscribed but nothing was sent yet
  IGNORED   the proxy did not subscribe to the type

The status is read from the replica's HTTP port (/debug/syncz, --http-addr), or
over its xDS port (--xds-address) as istioctl reads istiod's
(type URL istio.io/debug/syncz, plaintext).`,
		Example: `  # Status from a local replica's HTTP port
  pilotfish proxy-status --http-addr 127.0.0.1:15014

  # Over xDS, as istioctl proxy-status --xds-address does
  pilotfish proxy-status --xds-address 127.0.0.1:15010

  # Only the proxies of namespace shop, as JSON (/debug/syncz's shape)
  pilotfish proxy-status --namespace shop -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProxyStatus(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:15014", "HTTP address of the pilotfish replica (its /debug/syncz)")
	f.StringVar(&o.xdsAddr, "xds-address", "", "read the status over xDS from this plaintext gRPC address instead (istio.io/debug/syncz)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "only proxies of this namespace")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// proxyRow is one line of the table.
type proxyRow struct {
	name, cluster, istiod, version string
	status                         map[string]string // type URL → status text
}

func runProxyStatus(ctx context.Context, o *proxyStatusOptions, out io.Writer) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: want table or json", o.output)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var statuses []debug.SyncStatus
	var istiod string
	var err error
	if o.xdsAddr != "" {
		statuses, istiod, err = syncStatusOverXDS(ctx, o.xdsAddr)
	} else {
		statuses, istiod, err = syncStatusOverHTTP(ctx, o.httpAddr, o.namespace)
	}
	if err != nil {
		return err
	}
	if o.namespace != "" {
		statuses = filterNamespace(statuses, o.namespace)
	}
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(statuses)
	}
	return printProxyStatus(out, statuses, istiod, time.Now())
}

// filterNamespace keeps the proxies whose ID ("POD.NAMESPACE") is in ns.
func filterNamespace(in []debug.SyncStatus, ns string) []debug.SyncStatus {
	out := []debug.SyncStatus{}
	for _, s := range in {
		if strings.HasSuffix(s.ProxyID, "."+ns) {
			out = append(out, s)
		}
	}
	return out
}

func syncStatusOverHTTP(ctx context.Context, addr, namespace string) ([]debug.SyncStatus, string, error) {
	u := "http://" + addr + "/debug/syncz"
	if namespace != "" {
		u += "?namespace=" + namespace
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("proxy-status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return nil, "", fmt.Errorf("proxy-status: GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	var out []debug.SyncStatus
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, "", fmt.Errorf("proxy-status: decoding %s: %w", u, err)
	}
	return out, resp.Header.Get(debug.InstanceHeader), nil
}

// syncStatusOverXDS asks for istio.io/debug/syncz on an ADS stream, as
// istioctl does, and reads the ClientConfigs back into debug.SyncStatus.
func syncStatusOverXDS(ctx context.Context, addr string) ([]debug.SyncStatus, string, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, "", fmt.Errorf("proxy-status: %w", err)
	}
	defer cc.Close()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("proxy-status: ADS stream to %s: %w", addr, err)
	}
	meta, _ := structpb.NewStruct(map[string]any{"GENERATOR": "event", "NAMESPACE": "istio-system"})
	err = stream.Send(&discoveryv3.DiscoveryRequest{
		Node:    &corev3.Node{Id: "sidecar~0.0.0.0~pilotfish-proxy-status.istio-system~istio-system.svc.cluster.local", Metadata: meta},
		TypeUrl: serve.TypeDebugSyncz,
	})
	if err != nil {
		return nil, "", fmt.Errorf("proxy-status: %w", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, "", fmt.Errorf("proxy-status: reading %s from %s: %w", serve.TypeDebugSyncz, addr, err)
	}
	_ = stream.CloseSend()
	var out []debug.SyncStatus
	for _, a := range resp.GetResources() {
		c := &statusv3.ClientConfig{}
		if err := a.UnmarshalTo(c); err != nil {
			return nil, "", fmt.Errorf("proxy-status: a resource of %s: %w", serve.TypeDebugSyncz, err)
		}
		out = append(out, syncStatusOfClientConfig(c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProxyID < out[j].ProxyID })
	return out, debug.ControlPlaneName(resp.GetControlPlane().GetIdentifier()), nil
}

// syncStatusOfClientConfig maps a CSDS ClientConfig back to /debug/syncz's
// shape (statuses only; nonces are not part of CSDS).
func syncStatusOfClientConfig(c *statusv3.ClientConfig) debug.SyncStatus {
	md := c.GetNode().GetMetadata().GetFields()
	s := debug.SyncStatus{ProxyID: c.GetNode().GetId(), ClusterID: md["CLUSTER_ID"].GetStringValue(),
		IstioVersion: md["ISTIO_VERSION"].GetStringValue(), Resources: map[string]debug.ResourceStatus{}}
	for _, g := range c.GetGenericXdsConfigs() {
		r := debug.ResourceStatus{AckedVersion: g.GetVersionInfo(), LastError: g.GetErrorState().GetDetails()}
		if g.GetLastUpdated() != nil {
			r.SentTime = g.GetLastUpdated().AsTime()
		}
		switch g.GetConfigStatus() {
		case statusv3.ConfigStatus_SYNCED:
			r.Status = "SYNCED"
		case statusv3.ConfigStatus_NOT_SENT:
			r.Status = "NOT SENT"
		case statusv3.ConfigStatus_ERROR:
			r.Status = "ERROR"
		case statusv3.ConfigStatus_STALE:
			r.Status = "STALE"
		default:
			r.Status = "IGNORED"
		}
		s.Resources[g.GetTypeUrl()] = r
	}
	return s
}

// proxyStatusTypes are the table's type columns, in istioctl's order.
var proxyStatusTypes = []struct{ header, typeURL string }{
	{"CDS", engine.TypeCluster},
	{"LDS", engine.TypeListener},
	{"EDS", engine.TypeEndpoint},
	{"RDS", engine.TypeRoute},
	{"ECDS", debug.TypeExtensionConfig},
}

// printProxyStatus prints istioctl's table, proxies sorted by name. An
// acknowledged or rejected type shows the age of its last response, as
// istioctl does.
func printProxyStatus(out io.Writer, statuses []debug.SyncStatus, istiod string, now time.Time) error {
	if istiod == "" {
		istiod = "-"
	}
	rows := make([]debug.SyncStatus, len(statuses))
	copy(rows, statuses)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].ProxyID < rows[j].ProxyID })
	w := tabwriter.NewWriter(out, 0, 8, 5, ' ', 0)
	head := []string{"NAME", "CLUSTER"}
	for _, t := range proxyStatusTypes {
		head = append(head, t.header)
	}
	head = append(head, "ISTIOD", "VERSION")
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, s := range rows {
		line := []string{s.ProxyID, s.ClusterID}
		for _, t := range proxyStatusTypes {
			r, ok := s.Resources[t.typeURL]
			line = append(line, statusText(r, ok, now))
		}
		line = append(line, istiod, s.IstioVersion)
		fmt.Fprintln(w, strings.Join(line, "\t"))
	}
	return w.Flush()
}

func statusText(r debug.ResourceStatus, ok bool, now time.Time) string {
	if !ok || r.Status == "" || r.Status == "IGNORED" {
		return "IGNORED"
	}
	if r.Status == "NOT SENT" || r.SentTime.IsZero() {
		return r.Status
	}
	return r.Status + " (" + humanDuration(now.Sub(r.SentTime)) + ")"
}

// humanDuration renders an age as kubectl and istioctl do: "42s", "3m12s",
// "25m", "5h3m", "3d4h", "400d".
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 10*60:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if m := (s / 60) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	case s < 8*24*3600:
		if h := (s / 3600) % 24; h != 0 {
			return fmt.Sprintf("%dd%dh", s/86400, h)
		}
		return fmt.Sprintf("%dd", s/86400)
	}
	return fmt.Sprintf("%dd", s/86400)
}
