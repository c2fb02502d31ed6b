package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// injectWebhookSuffix ends the name of every sidecar-injector webhook
// istio's charts write (sidecar-injector.istio.io, rev.namespace.
// sidecar-injector.istio.io, ...): the webhooks istiod patches.
const injectWebhookSuffix = "sidecar-injector.istio.io"

// injectWebhookCABundle is a leader duty: as istiod does for its
// revision, it keeps the caBundle of the sidecar-injector webhooks (names
// ending in injectWebhookSuffix) of every MutatingWebhookConfiguration
// labelled istio.io/rev=<revision> (istio-sidecar-injector,
// istio-revision-tag-*) equal to the CA's roots: when one appears or
// changes, when the roots change, and every caBundleResync. A
// configuration of another revision, or without the label, is left alone
// (another istiod or pilotfish owns it). Errors are logged and retried.
func injectWebhookCABundle(client kubernetes.Interface, revision string, authority *ca.Authority, log *slog.Logger) func(context.Context) {
	if revision == "" {
		revision = "default"
	}
	return func(ctx context.Context) {
		log := log.With("component", "inject-webhook", "revision", revision)
		sel := labels.SelectorFromSet(labels.Set{"istio.io/rev": revision})
		f := informers.NewSharedInformerFactoryWithOptions(client, caBundleResync,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
		inf := f.Admissionregistration().V1().MutatingWebhookConfigurations()
		dirty := make(chan struct{}, 1)
		mark := func(any) {
			select {
			case dirty <- struct{}{}:
			default:
			}
		}
		if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark,
			UpdateFunc: func(_, o any) { mark(o) }}); err != nil {
			log.Error("webhook configuration informer", "err", err)
			return
		}
		f.Start(ctx.Done())
		defer f.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			return
		}
		for {
			changed := authority.Changed()
			wait := caBundleResync
			cfgs, err := inf.Lister().List(sel)
			if err == nil {
				roots := authority.Bundle().RootsPEM()
				for _, cfg := range cfgs {
					if e := patchInjectCABundle(ctx, client, cfg, roots, log); e != nil {
						err = e
					}
				}
			}
			if err != nil {
				log.Warn("updating the injection webhooks' caBundle failed; retrying", "err", err)
				wait = 5 * time.Second
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-dirty:
			case <-time.After(wait):
			}
		}
	}
}

// patchInjectCABundle writes roots into cfg's sidecar-injector webhooks
// that lack them (cfg, from the informer's cache, is not modified); an
// unchanged configuration is not written.
func patchInjectCABundle(ctx context.Context, client kubernetes.Interface, cfg *admissionregv1.MutatingWebhookConfiguration, roots []byte, log *slog.Logger) error {
	var out *admissionregv1.MutatingWebhookConfiguration
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		if !strings.HasSuffix(w.Name, injectWebhookSuffix) || bytes.Equal(w.ClientConfig.CABundle, roots) {
			continue
		}
		if out == nil {
			out = cfg.DeepCopy()
		}
		out.Webhooks[i].ClientConfig.CABundle = roots
	}
	if out == nil {
		return nil
	}
	// The resourceVersion read makes a concurrent write a conflict; the
	// informer's event for it brings the next try.
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update MutatingWebhookConfiguration %s: %w", cfg.Name, err)
	}
	log.Info("injection webhook caBundle set to the CA's roots", "config", cfg.Name)
	return nil
}
