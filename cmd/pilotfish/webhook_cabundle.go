package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// caBundleResync re-checks the webhook configuration this often, in case
// an upgrade of the chart (or a person) reset its caBundle.
const caBundleResync = time.Minute

// webhookCABundle is a leader duty: it keeps the caBundle of every webhook
// in ValidatingWebhookConfiguration name equal to the CA's trusted roots,
// at once, whenever the roots change, and every caBundleResync. Without it
// the API server could not verify a webhook certificate issued by a CA
// whose root exists only at runtime (a plug-in CA mounted from a Secret,
// rotation). Errors are logged and retried; they never stop serving.
func webhookCABundle(client kubernetes.Interface, name string, authority *ca.Authority, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		log := log.With("component", "webhook", "config", name)
		for {
			changed := authority.Changed()
			wait := caBundleResync
			if err := patchCABundle(ctx, client, name, authority.Bundle().RootsPEM(), log); err != nil {
				log.Warn("updating the webhook's caBundle failed; retrying", "err", err)
				wait = 5 * time.Second
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-time.After(wait):
			}
		}
	}
}

// patchCABundle writes roots into every webhook of the configuration that
// lacks them; an unchanged configuration is not written.
func patchCABundle(ctx context.Context, client kubernetes.Interface, name string, roots []byte, log *slog.Logger) error {
	api := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", name, err)
	}
	dirty := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, roots) {
			cfg.Webhooks[i].ClientConfig.CABundle = roots
			dirty = true
		}
	}
	if !dirty {
		return nil
	}
	// Update carries the resourceVersion read: a concurrent writer makes it
	// fail with a conflict, and the retry reads again.
	if _, err := api.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update ValidatingWebhookConfiguration %s: %w", name, err)
	}
	log.Info("webhook caBundle set to the CA's roots", "webhooks", len(cfg.Webhooks))
	return nil
}
