package loadgen

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// ProxyType is the kind of proxy simulated.
type ProxyType string

const (
	// Sidecar: an Envoy sidecar (node ID sidecar~...). Subscribes to CDS and
	// LDS as wildcards, then EDS and RDS by the names they reference, in
	// Envoy's order: CDS, EDS, LDS, RDS.
	Sidecar ProxyType = "sidecar"
	// Router: an Envoy gateway (node ID router~...), subscribing like a
	// sidecar.
	Router ProxyType = "router"
	// GRPC: a proxyless gRPC client (GENERATOR=grpc). Subscribes to the
	// Listeners named in GRPCTargets, then the route configurations, clusters
	// and endpoints they reference, all by name.
	GRPC ProxyType = "grpc"
)

// Mode is the xDS protocol variant.
type Mode string

const (
	SotW  Mode = "sotw"  // state of the world: StreamAggregatedResources
	Delta Mode = "delta" // incremental: DeltaAggregatedResources
)

// The client transports (Config.Transport).
const (
	// TransportGRPC is grpc-go's client transport: a reader and a writer
	// goroutine per connection, streams multiplexed (StreamsPerConn).
	TransportGRPC = "grpc"
	// TransportH2C is loadgen's own HTTP/2 transport (internal/h2c): one
	// stream per connection, read and written by the proxy's goroutine.
	TransportH2C = "h2c"
)

// Decode is how responses are decoded.
type Decode string

const (
	// Lazy walks the wire format for names only (the default; cheap).
	Lazy Decode = "lazy"
	// Full also unmarshals every resource and runs ValidateAll on it,
	// counting failures in the report (expensive).
	Full Decode = "full"
)

// Config configures a Run. The zero value of each field is its default,
// except XDS and Proxies, which are required.
type Config struct {
	// XDS is the ADS server's address, host:port (or a gRPC target such as
	// dns:///istiod.istio-system:15010), dialed in plaintext.
	XDS string
	// Proxies is the number of simulated proxies.
	Proxies int
	// StreamsPerConn multiplexes this many proxies' streams on one gRPC
	// connection. Default 1 (each proxy has its own, as real proxies do).
	StreamsPerConn int
	// Type is the kind of proxy. Default Sidecar.
	Type ProxyType
	// Mode is the protocol variant. Default SotW.
	Mode Mode
	// Namespaces spreads proxies over this many namespaces, round robin
	// (NamespacePrefix-0 ...). Default 1.
	Namespaces int
	// NamespacePrefix names the namespaces. Default "load".
	NamespacePrefix string
	// Apps spreads proxies over this many label sets (app=load-0 ...),
	// round robin. Default 1.
	Apps int
	// Labels are added to every proxy's labels (for routers, Gateway
	// selectors: istio=ingressgateway is the default for Router).
	Labels map[string]string
	// IPBase is the first proxy's IP minus one: proxy i gets IPBase+1+i.
	// Default 10.10.0.0.
	IPBase netip.Addr
	// Domain is the cluster DNS domain of node IDs. Default cluster.local.
	Domain string
	// ClusterID is the CLUSTER_ID metadata. Default Kubernetes.
	ClusterID string
	// IstioVersion is the ISTIO_VERSION metadata. Default 1.31.0.
	IstioVersion string
	// GRPCTargets are the Listener names (host:port) a GRPC proxy requests.
	GRPCTargets []string

	// Ramp is the connect rate in proxies per second; 0 connects all at once.
	Ramp float64
	// Duration stops the run after this long. 0 runs until every proxy has
	// full config and every change has been measured (or Timeout).
	Duration time.Duration
	// Timeout gives up waiting for full config or convergence after this
	// long from the start; Run then returns ErrIncomplete. 0: no limit
	// (Duration or the context bound the run).
	Timeout time.Duration

	// NackRate is the fraction of responses NACKed (error_detail set). A
	// response after a NACK of the same type is always ACKed.
	NackRate float64
	// StalledProxies proxies stop reading their stream once they have full
	// config (see fault.go); NackingProxies proxies NACK every response.
	// Both are left out of the healthy proxies' figures.
	StalledProxies int
	NackingProxies int
	// Seed seeds the per-proxy random choices (NACKs). Default 1.
	Seed uint64
	// Decode is how responses are decoded. Default Lazy.
	Decode Decode

	// ChangeCmd is a shell command (sh -c) run once every proxy has full
	// config; LOADGEN_CHANGE=i is set in its environment (1-based) and "{i}"
	// in it is replaced by i.
	ChangeCmd string
	// ChangeFunc is the Go alternative to ChangeCmd, for callers such as
	// bench. Set at most one of them.
	ChangeFunc func(ctx context.Context) error
	// Changes is how many changes to make. Default 1 when ChangeCmd or
	// ChangeFunc is set.
	Changes int
	// ChangeInterval is the pause before each change (after full config for
	// the first, after convergence of the previous for the others).
	// Default 1s.
	ChangeInterval time.Duration
	// ChangeTimeout bounds the wait for one change to converge. Default 2m.
	ChangeTimeout time.Duration
	// ExpectResource recognises a change: "cds/NAME" is converged on a proxy
	// when it holds NAME (ACKed) with full config; "!cds/NAME" when it no
	// longer holds it. Types: cds, eds, lds, rds. "{i}" is replaced by the
	// change number. Empty: any version bump after the change, with full
	// config, counts as converged.
	ExpectResource string

	// Transport is the client's gRPC transport: TransportGRPC (grpc-go's,
	// the default) or TransportH2C (loadgen's own, one stream per
	// connection on the proxy's goroutine, no reader or writer goroutines:
	// less of a shared machine taken from the server under test).
	// TransportH2C needs StreamsPerConn 1 and ignores DialOptions.
	Transport string
	// Dialer, if set, dials the server instead of net.Dialer (for in-memory
	// listeners or custom transports).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// DialOptions are added to loadgen's own (TransportGRPC only).
	DialOptions []grpc.DialOption

	// ServerMetrics is the URL of the server's Prometheus metrics (e.g.
	// http://127.0.0.1:15014/metrics), sampled during the run for its
	// pushes, rejects, connected proxies, heap and (without ServerPID) CPU
	// and RSS: Report.Server. Empty: not sampled.
	ServerMetrics string
	// ServerPID is the server's process ID (Linux): its CPU time and RSS
	// are read from /proc during the run. 0: not sampled.
	ServerPID int
	// ServerSampleInterval is the time between samples of the server.
	// Default 1s.
	ServerSampleInterval time.Duration

	// Progress receives a progress line every ProgressInterval (nil: none).
	Progress io.Writer
	// ProgressTTY rewrites one line in place (for a terminal) instead of
	// writing a line each time.
	ProgressTTY bool
	// ProgressInterval defaults to 250ms with ProgressTTY, else 5s.
	ProgressInterval time.Duration
	// Logger receives warnings and per-stream errors (at Debug). Default:
	// discard.
	Logger *slog.Logger
}

// withDefaults returns c with defaults applied, or an ErrConfig.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if c.XDS == "" {
		return bad("the xDS server address is required")
	}
	if c.Proxies <= 0 {
		return bad("proxies must be positive, got %d", c.Proxies)
	}
	if c.StreamsPerConn == 0 {
		c.StreamsPerConn = 1
	}
	if c.StreamsPerConn < 0 {
		return bad("streams per connection must be positive, got %d", c.StreamsPerConn)
	}
	switch c.Transport {
	case "":
		c.Transport = TransportGRPC
	case TransportGRPC:
	case TransportH2C:
		if c.StreamsPerConn != 1 {
			return bad("transport %s carries one stream per connection; use %s for %d streams per connection", TransportH2C, TransportGRPC, c.StreamsPerConn)
		}
	default:
		return bad("unknown transport %q (want %s or %s)", c.Transport, TransportGRPC, TransportH2C)
	}
	switch c.Type {
	case "":
		c.Type = Sidecar
	case Sidecar, Router, GRPC:
	default:
		return bad("proxy type %q: want sidecar, router or grpc", c.Type)
	}
	if c.Type == GRPC && len(c.GRPCTargets) == 0 {
		return bad("a grpc proxy needs at least one target listener (host:port)")
	}
	switch c.Mode {
	case "":
		c.Mode = SotW
	case SotW, Delta:
	default:
		return bad("mode %q: want sotw or delta", c.Mode)
	}
	switch c.Decode {
	case "":
		c.Decode = Lazy
	case Lazy, Full:
	default:
		return bad("decode %q: want lazy or full", c.Decode)
	}
	if c.Namespaces == 0 {
		c.Namespaces = 1
	}
	if c.Apps == 0 {
		c.Apps = 1
	}
	if c.Namespaces < 0 || c.Apps < 0 {
		return bad("namespaces and apps must be positive")
	}
	if c.NamespacePrefix == "" {
		c.NamespacePrefix = "load"
	}
	if !c.IPBase.IsValid() {
		c.IPBase = netip.AddrFrom4([4]byte{10, 10, 0, 0})
	}
	if c.Domain == "" {
		c.Domain = "cluster.local"
	}
	if c.ClusterID == "" {
		c.ClusterID = "Kubernetes"
	}
	if c.IstioVersion == "" {
		c.IstioVersion = "1.31.0"
	}
	if c.Ramp < 0 {
		return bad("ramp must not be negative")
	}
	if c.Duration < 0 || c.Timeout < 0 {
		return bad("duration and timeout must not be negative")
	}
	if c.NackRate < 0 || c.NackRate > 1 {
		return bad("nack rate %v: want a fraction in [0, 1]", c.NackRate)
	}
	if c.StalledProxies < 0 || c.NackingProxies < 0 || c.StalledProxies+c.NackingProxies >= c.Proxies {
		return bad("%d stalled and %d NACKing proxies of %d: want at least one healthy proxy", c.StalledProxies, c.NackingProxies, c.Proxies)
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.ChangeCmd != "" && c.ChangeFunc != nil {
		return bad("set a change command or a change function, not both")
	}
	hasChange := c.ChangeCmd != "" || c.ChangeFunc != nil
	if c.Changes < 0 {
		return bad("changes must not be negative")
	}
	if hasChange && c.Changes == 0 {
		c.Changes = 1
	}
	if !hasChange && c.Changes > 0 {
		return bad("%d changes requested but no change command or function", c.Changes)
	}
	if c.ChangeInterval == 0 {
		c.ChangeInterval = time.Second
	}
	if c.ChangeTimeout == 0 {
		c.ChangeTimeout = 2 * time.Minute
	}
	if c.ExpectResource != "" {
		if _, err := parseExpect(c.ExpectResource, 1); err != nil {
			return c, err
		}
	}
	if c.ServerMetrics != "" {
		u, err := url.Parse(c.ServerMetrics)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("server metrics URL %q: want http://HOST:PORT/PATH", c.ServerMetrics)
		}
	}
	if c.ServerPID < 0 {
		return bad("server pid %d: want a process ID", c.ServerPID)
	}
	if c.ServerSampleInterval < 0 {
		return bad("server sample interval must not be negative")
	}
	if c.ServerSampleInterval == 0 {
		c.ServerSampleInterval = time.Second
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = 5 * time.Second
		if c.ProgressTTY {
			c.ProgressInterval = 250 * time.Millisecond
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// expectation recognises a change on one proxy.
type expectation struct {
	t      xtype
	name   string
	negate bool
}

func (e expectation) String() string {
	s := e.t.String() + "/" + e.name
	if e.negate {
		s = "!" + s
	}
	return s
}

// parseExpect parses "[!]TYPE/NAME" with "{i}" replaced by change number i.
func parseExpect(s string, i int) (expectation, error) {
	var e expectation
	if rest, ok := strings.CutPrefix(s, "!"); ok {
		e.negate, s = true, rest
	}
	typ, name, ok := strings.Cut(s, "/")
	t, known := typeOfName(typ)
	if !ok || !known || name == "" {
		return e, fmt.Errorf("%w: expected resource %q: want [!]TYPE/NAME with TYPE cds, eds, lds or rds", ErrConfig, s)
	}
	e.t, e.name = t, strings.ReplaceAll(name, "{i}", fmt.Sprint(i))
	return e, nil
}
