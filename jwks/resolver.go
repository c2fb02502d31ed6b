package jwks

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/pprof"
	"slices"
	"sync"
	"time"
)

// Defaults, istiod's where it has one.
const (
	// DefaultRefreshInterval is PILOT_JWT_PUB_KEY_REFRESH_INTERVAL's default.
	DefaultRefreshInterval = 20 * time.Minute
	// DefaultFailureInterval is istiod's first refresh interval after a
	// failed refresh of a source that has keys; it doubles up to
	// MaxFailureInterval.
	DefaultFailureInterval = time.Minute
	// MaxFailureInterval is istiod's longest refresh interval after
	// failures.
	MaxFailureInterval = time.Hour
	// DefaultRetryInterval is the first retry of a source never fetched;
	// it doubles up to the failure interval (istiod retries such a source
	// at once on its next push).
	DefaultRetryInterval = time.Second
	// DefaultTimeout is a request's timeout when its rule sets none
	// (JWTRule.timeout's default).
	DefaultTimeout = 5 * time.Second
	// DefaultMaxTimeout caps a rule's timeout.
	DefaultMaxTimeout = 30 * time.Second
	// DefaultMaxBytes bounds a response body.
	DefaultMaxBytes = 1 << 20
	// DefaultMaxConcurrent bounds the requests in flight.
	DefaultMaxConcurrent = 8
	// DefaultMaxSources bounds the sources held.
	DefaultMaxSources = 1024
)

// Source names one key set: a JWKS URI, or an issuer whose OpenID discovery
// document names one (URI empty). Issuer and URI together identify it, as
// in istiod's cache.
type Source struct {
	Issuer string
	URI    string
	// Timeout bounds each request for the source (0: DefaultTimeout). When
	// several rules name a source, the longest wins.
	Timeout time.Duration
}

// KeySet is a source's last key set fetched: the server's body as it sent
// it (istiod inlines it so), checked to be a JSON Web Key Set.
type KeySet struct {
	Issuer, URI string
	JWKS        string
}

// Metrics receives the resolver's events.
type Metrics interface {
	// Fetched counts one HTTP request (istiod's
	// pilot_jwks_resolver_network_fetch_success_total and _fail_total).
	Fetched(ok bool)
}

type nopMetrics struct{}

func (nopMetrics) Fetched(bool) {}

// Options configure a Resolver; zero fields take the defaults above.
type Options struct {
	RefreshInterval time.Duration
	FailureInterval time.Duration
	RetryInterval   time.Duration
	MaxTimeout      time.Duration
	MaxBytes        int64
	MaxConcurrent   int
	MaxSources      int
	// RootCAs verify https servers; nil is the system pool plus
	// ExtraRootsPEM.
	RootCAs       *x509.CertPool
	ExtraRootsPEM []byte
	// InsecureSkipVerify skips server certificate checks
	// (JWKS_RESOLVER_INSECURE_SKIP_VERIFY).
	InsecureSkipVerify bool
	// BlockedCIDRs are addresses no request may connect to
	// (BLOCKED_CIDRS_IN_JWKS_URIS).
	BlockedCIDRs []netip.Prefix
	Logger       *slog.Logger
	Metrics      Metrics
}

func (o *Options) defaults() {
	setDefault(&o.RefreshInterval, DefaultRefreshInterval)
	setDefault(&o.FailureInterval, DefaultFailureInterval)
	setDefault(&o.RetryInterval, DefaultRetryInterval)
	setDefault(&o.MaxTimeout, DefaultMaxTimeout)
	setDefault(&o.MaxBytes, DefaultMaxBytes)
	setDefault(&o.MaxConcurrent, DefaultMaxConcurrent)
	setDefault(&o.MaxSources, DefaultMaxSources)
	if o.RootCAs == nil {
		o.RootCAs = rootPool(o.ExtraRootsPEM)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
}

func setDefault[T cmp.Ordered](v *T, d T) {
	var zero T
	if *v <= zero {
		*v = d
	}
}

// Resolver fetches and refreshes the key sets of the sources it is told
// to want (see the package doc).
type Resolver struct {
	opts   Options
	client *http.Client
	log    *slog.Logger
	wake   chan struct{} // capacity 1: a change of the wanted sources

	mu      sync.Mutex
	entries map[sourceKey]*entry // guarded by mu
	changed bool                 // guarded by mu: the published list is stale
	pubbing bool                 // guarded by mu: publish is running
	dropped int                  // guarded by mu: sources past MaxSources at the last Want
}

type sourceKey struct{ issuer, uri string }

// entry is one wanted source; guarded by Resolver.mu.
type entry struct {
	src      Source
	jwks     string // last key set fetched ("" none)
	canon    string // its ParseKeySet form
	failures int    // consecutive failed fetches
	tried    bool   // a fetch has ended (success or failure)
	next     time.Time
	fetching bool
}

// New returns a resolver wanting nothing; Run starts it.
func New(opts Options) *Resolver {
	opts.defaults()
	return &Resolver{
		opts:    opts,
		client:  newClient(&opts),
		log:     opts.Logger,
		wake:    make(chan struct{}, 1),
		entries: map[sourceKey]*entry{},
	}
}

// Want replaces the wanted sources. A new one is fetched at once; one no
// longer wanted is forgotten (its key set leaves the published list). It
// never blocks.
func (r *Resolver) Want(srcs []Source) {
	want := map[sourceKey]Source{}
	for _, s := range srcs {
		if s.Issuer == "" && s.URI == "" {
			continue
		}
		if s.Timeout <= 0 {
			s.Timeout = DefaultTimeout
		}
		s.Timeout = min(s.Timeout, r.opts.MaxTimeout)
		k := sourceKey{s.Issuer, s.URI}
		if prev, ok := want[k]; ok && prev.Timeout >= s.Timeout {
			continue
		}
		want[k] = s
	}
	keys := make([]sourceKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b sourceKey) int { return cmp.Or(cmp.Compare(a.issuer, b.issuer), cmp.Compare(a.uri, b.uri)) })
	dropped := 0
	if len(keys) > r.opts.MaxSources {
		dropped = len(keys) - r.opts.MaxSources
		keys = keys[:r.opts.MaxSources]
	}
	now := time.Now()
	r.mu.Lock()
	next := make(map[sourceKey]*entry, len(keys))
	for _, k := range keys {
		e := r.entries[k]
		if e == nil {
			e = &entry{next: now}
		}
		e.src = want[k]
		next[k] = e
	}
	for k, e := range r.entries {
		if next[k] == nil && e.jwks != "" {
			r.changed = true
		}
	}
	r.entries = next
	logDrop := dropped > 0 && dropped != r.dropped
	r.dropped = dropped
	r.mu.Unlock()
	if logDrop {
		r.log.Error("too many JWKS sources: the rest are not fetched and their rules accept no token",
			"limit", r.opts.MaxSources, "dropped", dropped)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Settled reports whether every wanted source has been fetched once
// (successfully or not) and what was fetched has been published: the
// server's readiness waits for it, as istiod's first push waits for its
// fetches. A source that cannot be fetched settles after one attempt,
// bounded by its timeout.
func (r *Resolver) Settled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed || r.pubbing {
		return false
	}
	for _, e := range r.entries {
		if !e.tried {
			return false
		}
	}
	return true
}

// KeySets returns the key sets fetched for the wanted sources, sorted by
// issuer and URI.
func (r *Resolver) KeySets() []KeySet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listLocked()
}

func (r *Resolver) listLocked() []KeySet {
	out := make([]KeySet, 0, len(r.entries))
	for k, e := range r.entries {
		if e.jwks != "" {
			out = append(out, KeySet{Issuer: k.issuer, URI: k.uri, JWKS: e.jwks})
		}
	}
	slices.SortFunc(out, func(a, b KeySet) int { return cmp.Or(cmp.Compare(a.Issuer, b.Issuer), cmp.Compare(a.URI, b.URI)) })
	return out
}

// fetchResult is one fetch's outcome.
type fetchResult struct {
	key   sourceKey
	e     *entry
	body  string
	canon string
	err   error
}

// Run fetches and refreshes until ctx ends, calling publish with every key
// set fetched (KeySets) each time the list changes. It returns once every
// request it started has ended.
func (r *Resolver) Run(ctx context.Context, publish func([]KeySet)) {
	// Each fetch sends one result and at most MaxConcurrent run: a fetch
	// never blocks on the channel, even after Run stops reading it.
	results := make(chan fetchResult, r.opts.MaxConcurrent)
	var wg sync.WaitGroup
	defer wg.Wait()
	inflight := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		r.mu.Lock()
		var due []sourceKey
		var wakeAt time.Time
		for k, e := range r.entries {
			switch {
			case e.fetching:
			case !e.next.After(now):
				due = append(due, k)
			case wakeAt.IsZero() || e.next.Before(wakeAt):
				wakeAt = e.next
			}
		}
		slices.SortFunc(due, func(a, b sourceKey) int {
			return cmp.Or(r.entries[a].next.Compare(r.entries[b].next), cmp.Compare(a.issuer, b.issuer), cmp.Compare(a.uri, b.uri))
		})
		if free := r.opts.MaxConcurrent - inflight; len(due) > free {
			due = due[:free]
		}
		type start struct {
			k   sourceKey
			e   *entry
			src Source
		}
		starts := make([]start, len(due))
		for i, k := range due {
			e := r.entries[k]
			e.fetching = true
			starts[i] = start{k, e, e.src}
		}
		if r.changed {
			list := r.listLocked()
			r.changed, r.pubbing = false, true
			r.mu.Unlock()
			publish(list)
			r.mu.Lock()
			r.pubbing = false
		}
		r.mu.Unlock()
		for _, s := range starts {
			inflight++
			wg.Add(1)
			go pprof.Do(ctx, pprof.Labels("pilotfish", "jwks-fetch"), func(ctx context.Context) {
				defer wg.Done()
				body, canon, err := r.fetch(ctx, s.src)
				results <- fetchResult{key: s.k, e: s.e, body: body, canon: canon, err: err}
			})
		}
		if !wakeAt.IsZero() {
			timer.Reset(max(time.Until(wakeAt), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case res := <-results:
			inflight--
			r.finish(res)
		case <-timer.C:
		}
	}
}

// fetch gets src's key set: its URI's body, or the body of the jwks_uri of
// its issuer's discovery document.
func (r *Resolver) fetch(ctx context.Context, src Source) (body, canon string, err error) {
	uri := src.URI
	if uri == "" {
		doc, err := r.get(ctx, discoveryURL(src.Issuer), src.Timeout)
		if err != nil {
			return "", "", err
		}
		if uri, err = ParseDiscovery(doc); err != nil {
			return "", "", err
		}
	}
	b, err := r.get(ctx, uri, src.Timeout)
	if err != nil {
		return "", "", err
	}
	canon, err = ParseKeySet(b)
	if err != nil {
		return "", "", err
	}
	return string(b), canon, nil
}

// finish records a fetch's result and schedules the source's next fetch.
func (r *Resolver) finish(res fetchResult) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := res.e
	e.fetching, e.tried = false, true
	if r.entries[res.key] != e {
		return // no longer wanted (or wanted anew)
	}
	if res.err == nil {
		e.failures = 0
		e.next = now.Add(r.opts.RefreshInterval)
		if res.canon != e.canon || e.jwks == "" {
			e.jwks, e.canon = res.body, res.canon
			r.changed = true
			r.log.Info("JWKS fetched", "issuer", e.src.Issuer, "uri", e.src.URI)
		}
		return
	}
	e.failures++
	e.next = now.Add(r.backoff(e))
	level := slog.LevelWarn
	if errors.Is(res.err, context.Canceled) {
		level = slog.LevelDebug
	}
	r.log.Log(context.Background(), level, "JWKS fetch failed", "issuer", e.src.Issuer, "uri", e.src.URI,
		"failures", e.failures, "keeps_last_keys", e.jwks != "", "retry_in", e.next.Sub(now).Round(time.Millisecond), "err", res.err)
}

// backoff is the wait after e's consecutive failures: from RetryInterval
// up to FailureInterval for a source without keys (its rules accept no
// token meanwhile), from FailureInterval up to MaxFailureInterval for one
// that keeps its last keys (istiod's refresh on failure).
func (r *Resolver) backoff(e *entry) time.Duration {
	base, limit := r.opts.FailureInterval, max(MaxFailureInterval, r.opts.FailureInterval)
	if e.jwks == "" {
		base, limit = r.opts.RetryInterval, max(r.opts.FailureInterval, r.opts.RetryInterval)
	}
	d := base
	for i := 1; i < e.failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
