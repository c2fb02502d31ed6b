package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// webhookOptions are the admission webhook's flags of `pilotfish serve`.
type webhookOptions struct {
	addr     string
	certFile string
	keyFile  string
	// configName: the ValidatingWebhookConfiguration whose caBundle the
	// leader keeps equal to the CA's roots (webhook_cabundle.go).
	configName string
}

func addWebhookFlags(f *pflag.FlagSet, o *webhookOptions) {
	f.StringVar(&o.addr, "webhook-addr", "127.0.0.1:15017", "listen address of the HTTPS validating admission webhook (POST "+ingest.WebhookPath+"); istiod's port is :15017; empty disables")
	f.StringVar(&o.certFile, "webhook-cert", "", "PEM certificate (chain) the webhook serves, re-read when the file changes; without it, a certificate from pilotfish's CA for "+ca.DefaultServingDNSName+", istiod.$POD_NAMESPACE.svc and --tls-san names")
	f.StringVar(&o.keyFile, "webhook-key", "", "PEM private key of --webhook-cert")
	f.StringVar(&o.configName, "webhook-config-name", "", "ValidatingWebhookConfiguration whose caBundle the elected replica keeps equal to pilotfish's CA roots (with an API server, and without --webhook-cert); empty: leave it alone")
}

// webhookServer is the HTTPS admission webhook. Every method is safe on a
// nil receiver (webhook off).
type webhookServer struct {
	log     *slog.Logger
	srv     *http.Server
	lis     net.Listener
	serving *ca.Serving // nil with --webhook-cert
}

// newWebhookServer opens the webhook's listener. Its certificate comes from
// --webhook-cert/--webhook-key (for a CA outside pilotfish, such as
// cert-manager), else from pilotfish's CA, whose root is then the
// webhook's caBundle. Without either (CA disabled), the webhook is off.
func newWebhookServer(o webhookOptions, tlsSANs []string, secure *secureServing, log *slog.Logger) (*webhookServer, error) {
	if o.addr == "" {
		return nil, nil
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return nil, errors.New("--webhook-cert and --webhook-key go together")
	}
	w := &webhookServer{log: log.With("component", "webhook")}
	var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	switch {
	case o.certFile != "":
		kp := &keyPairFiles{cert: o.certFile, key: o.keyFile}
		if _, err := kp.get(nil); err != nil {
			return nil, err
		}
		getCert = kp.get
	case secure != nil:
		names := append([]string{"istiod." + envString("POD_NAMESPACE", "istio-system") + ".svc"}, tlsSANs...)
		s, err := ca.NewServing(secure.authority, ca.ServingOptions{Names: names, Logger: w.log})
		if err != nil {
			return nil, fmt.Errorf("webhook certificate: %w", err)
		}
		w.serving = s
		getCert = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.Certificate(), nil }
	default:
		log.Warn("webhook off: the CA is disabled and no --webhook-cert/--webhook-key is given")
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.Handle(ingest.WebhookPath, ingest.NewWebhook(w.log))
	w.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert},
		ReadHeaderTimeout: 10 * time.Second,
		// The API server's webhook timeout is at most 30 s.
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		ErrorLog:     slog.NewLogLogger(w.log.Handler(), slog.LevelDebug),
	}
	var err error
	if w.lis, err = net.Listen("tcp", o.addr); err != nil {
		return nil, fmt.Errorf("webhook listen on %s: %w", o.addr, err)
	}
	return w, nil
}

// run serves until close; it returns at once.
func (w *webhookServer) run(ctx context.Context) {
	if w == nil {
		return
	}
	if w.serving != nil {
		go w.serving.Run(ctx)
	}
	go func() {
		if err := w.srv.ServeTLS(w.lis, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("webhook server stopped", "err", err)
		}
	}()
}

func (w *webhookServer) addr() net.Addr {
	if w == nil {
		return nil
	}
	return w.lis.Addr()
}

// caManaged reports whether the webhook serves a certificate of pilotfish's
// CA, whose roots must then be the configuration's caBundle.
func (w *webhookServer) caManaged() bool { return w != nil && w.serving != nil }

// close stops the server, letting reviews in flight finish for a moment.
func (w *webhookServer) close() {
	if w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.srv.Shutdown(ctx)
	w.lis.Close() // Shutdown closes it only once Serve ran
}

// keyPairFiles serves a certificate from files, reloaded when either file's
// modification time changes (cert-manager and kubelet rewrite a Secret
// volume in place).
type keyPairFiles struct {
	cert, key string
	mu        sync.Mutex
	loaded    *tls.Certificate // guarded by mu
	certMod   time.Time        // guarded by mu
	keyMod    time.Time        // guarded by mu
}

func (k *keyPairFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs, err := os.Stat(k.cert)
	if err != nil {
		return nil, fmt.Errorf("--webhook-cert: %w", err)
	}
	ks, err := os.Stat(k.key)
	if err != nil {
		return nil, fmt.Errorf("--webhook-key: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.loaded != nil && cs.ModTime().Equal(k.certMod) && ks.ModTime().Equal(k.keyMod) {
		return k.loaded, nil
	}
	c, err := tls.LoadX509KeyPair(k.cert, k.key)
	if err != nil {
		if k.loaded != nil {
			return k.loaded, nil // mid-rewrite: keep serving the last good pair
		}
		return nil, fmt.Errorf("--webhook-cert/--webhook-key: %w", err)
	}
	k.loaded, k.certMod, k.keyMod = &c, cs.ModTime(), ks.ModTime()
	return k.loaded, nil
}
