package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderOptions are the leader election's flags of `pilotfish serve`.
// Every replica serves xDS; the leader alone runs the duties that must
// happen once per cluster (writing shared objects). Election runs only
// when an API server is watched.
type leaderOptions struct {
	namespace string
	lease     string
	// rootCertConfigMaps: the leader writes istio-ca-root-cert everywhere.
	rootCertConfigMaps bool
	// Timing of client-go's election; tests shorten them.
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

func addLeaderFlags(f *pflag.FlagSet, o *leaderOptions) {
	f.StringVar(&o.namespace, "leader-election-namespace", envString("POD_NAMESPACE", "istio-system"), "namespace of the leader election Lease: the pod's (POD_NAMESPACE)")
	f.StringVar(&o.lease, "leader-election-lease", "pilotfish-leader", "name of the Lease the replicas elect a leader with; the leader alone writes shared objects")
	f.BoolVar(&o.rootCertConfigMaps, "root-cert-configmaps", false, "the elected replica writes the CA's roots into ConfigMap istio-ca-root-cert (key root-cert.pem) of every namespace, where istio-agent reads them, as istiod does; off by default so that a pilotfish run against a cluster with an istiod cannot replace its roots")
	o.leaseDuration, o.renewDeadline, o.retryPeriod = 30*time.Second, 15*time.Second, 5*time.Second
}

// leader runs client-go leader election on a coordination.k8s.io Lease and
// the duties registered with it: each runs in a goroutine while this
// replica leads, its context ending when leadership is lost.
type leader struct {
	client kubernetes.Interface
	opts   leaderOptions
	id     string
	log    *slog.Logger
	is     atomic.Bool

	mu     sync.Mutex
	duties []func(context.Context) // guarded by mu
	done   chan struct{}           // closed when start's Run returns
}

// newLeader prepares an election; id names this replica in the Lease (its
// pod name, as istiod does).
func newLeader(client kubernetes.Interface, o leaderOptions, id string, log *slog.Logger) *leader {
	if o.leaseDuration == 0 {
		o.leaseDuration, o.renewDeadline, o.retryPeriod = 30*time.Second, 15*time.Second, 5*time.Second
	}
	return &leader{client: client, opts: o, id: id, log: log.With("component", "leader", "lease", o.namespace+"/"+o.lease, "id", id)}
}

// replicaID names this replica: the pod's name (POD_NAME, else the
// hostname, which is the pod's name in Kubernetes) plus a random suffix, so
// two servers in one process or host stay distinct.
func replicaID() string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	return name + "_" + strconv.FormatUint(rand.Uint64()&0xffffffff, 16)
}

// IsLeader reports whether this replica leads now.
func (l *leader) IsLeader() bool { return l != nil && l.is.Load() }

// AddDuty registers f to run while this replica leads; call before Run.
func (l *leader) AddDuty(f func(ctx context.Context)) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.duties = append(l.duties, f)
	l.mu.Unlock()
}

// Run takes part in the election until ctx ends, standing again after a
// lost leadership. On ctx's end a leader releases the Lease so that another
// replica takes over at once instead of after the lease duration.
func (l *leader) Run(ctx context.Context) {
	if l == nil {
		return
	}
	pprof.Do(ctx, pprof.Labels("pilotfish", "leader-election"), func(ctx context.Context) {
		for ctx.Err() == nil {
			l.runOnce(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(l.opts.retryPeriod):
			}
		}
	})
}

func (l *leader) runOnce(ctx context.Context) {
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, l.opts.namespace, l.opts.lease,
		l.client.CoreV1(), l.client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: l.id})
	if err != nil {
		l.log.Error("leader election lock", "err", err)
		return
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   l.opts.leaseDuration,
		RenewDeadline:   l.opts.renewDeadline,
		RetryPeriod:     l.opts.retryPeriod,
		ReleaseOnCancel: true,
		Name:            l.opts.lease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: l.lead,
			OnStoppedLeading: func() {
				if l.is.Swap(false) {
					l.log.Info("leadership lost")
				}
			},
			OnNewLeader: func(id string) {
				if id != l.id {
					l.log.Info("leader elected", "leader", id)
				}
			},
		},
	})
	if err != nil {
		l.log.Error("leader election", "err", err)
		return
	}
	le.Run(ctx)
}

// lead runs every duty until ctx (leadership) ends.
func (l *leader) lead(ctx context.Context) {
	l.is.Store(true)
	l.log.Info("leading")
	l.mu.Lock()
	duties := append([]func(context.Context){}, l.duties...)
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range duties {
		wg.Go(func() { d(ctx) })
	}
	wg.Wait()
}

// newServeLeader sets up serve's leader election when an API server is
// watched (cfg non-nil; else it returns nil, whose methods do nothing) and
// registers the duties: keeping the webhook configuration's caBundle equal
// to the CA's roots when the webhook serves a certificate of the CA.
func newServeLeader(cfg *rest.Config, o leaderOptions, wo webhookOptions, io injectOptions, secure *secureServing, wh *webhookServer, log *slog.Logger) (*leader, error) {
	if cfg == nil {
		return nil, nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	l := newLeader(client, o, replicaID(), log)
	if wo.configName != "" && wh.caManaged() {
		l.AddDuty(webhookCABundle(client, wo.configName, secure.authority, log))
	}
	if o.rootCertConfigMaps && secure != nil {
		l.AddDuty(rootCertConfigMaps(client, secure.authority, log))
	}
	if io.webhookCABundle && wh.caManaged() { // inject_cabundle.go
		l.AddDuty(injectWebhookCABundle(client, io.revision, secure.authority, log))
	}
	return l, nil
}

// serveLeader is newServeLeader for serve's flags: it elects only when an
// API server is watched (serve_kube.go's rule).
func serveLeader(o *serveOptions, secure *secureServing, wh *webhookServer, log *slog.Logger) (*leader, error) {
	cfg, err := o.kube.restConfig(o.configDir)
	if err != nil {
		return nil, err
	}
	lo := o.leader
	if lo.namespace == "" {
		lo.namespace = "default" // options built in code (tests) name none
	}
	if lo.lease == "" {
		lo.lease = "pilotfish-leader"
	}
	return newServeLeader(cfg, lo, o.webhook, o.inject, secure, wh, log)
}

// start runs the election in the background until ctx ends.
func (l *leader) start(ctx context.Context) {
	if l == nil {
		return
	}
	l.done = make(chan struct{})
	go func() { l.Run(ctx); close(l.done) }()
}

// wait waits, for a few seconds at most, until a started election has
// ended and released the Lease, so that another replica takes over at once.
func (l *leader) wait() {
	if l == nil || l.done == nil {
		return
	}
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
	}
}
