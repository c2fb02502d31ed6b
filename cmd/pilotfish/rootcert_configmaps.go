package main

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// The ConfigMap istio-agent reads the mesh's trusted roots from, in every
// namespace (istiod's namespace controller writes the same).
const (
	rootCertConfigMap = "istio-ca-root-cert"
	rootCertKey       = "root-cert.pem"
)

// rootCertResync re-checks every namespace this often besides the events.
const rootCertResync = 5 * time.Minute

// rootCertConfigMaps is a leader duty: it keeps ConfigMap
// istio-ca-root-cert (key root-cert.pem) equal to the CA's roots in every
// namespace that is not being deleted: when a namespace appears, when the
// ConfigMap is changed or deleted by someone else, and when the roots
// change. Its informers watch Namespaces and only the ConfigMaps of that
// name (a field selector), so it caches nothing else.
func rootCertConfigMaps(client kubernetes.Interface, authority *ca.Authority, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		log := log.With("component", "root-cert-configmaps")
		nsFactory := informers.NewSharedInformerFactory(client, rootCertResync)
		cmFactory := informers.NewSharedInformerFactoryWithOptions(client, rootCertResync,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", rootCertConfigMap).String()
			}))
		namespaces := nsFactory.Core().V1().Namespaces()
		configMaps := cmFactory.Core().V1().ConfigMaps()
		dirty := make(chan struct{}, 1)
		mark := func(any) {
			select {
			case dirty <- struct{}{}:
			default:
			}
		}
		handler := cache.ResourceEventHandlerFuncs{AddFunc: mark, UpdateFunc: func(_, o any) { mark(o) }, DeleteFunc: mark}
		if _, err := namespaces.Informer().AddEventHandler(handler); err != nil {
			log.Error("namespace informer", "err", err)
			return
		}
		if _, err := configMaps.Informer().AddEventHandler(handler); err != nil {
			log.Error("configmap informer", "err", err)
			return
		}
		nsFactory.Start(ctx.Done())
		cmFactory.Start(ctx.Done())
		defer nsFactory.Shutdown()
		defer cmFactory.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), namespaces.Informer().HasSynced, configMaps.Informer().HasSynced) {
			return
		}
		for {
			changed := authority.Changed()
			roots := string(authority.Bundle().RootsPEM())
			nsList, _ := namespaces.Lister().List(labels.Everything())
			failed := false
			for _, ns := range nsList {
				if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
					continue
				}
				cm, err := configMaps.Lister().ConfigMaps(ns.Name).Get(rootCertConfigMap)
				if err == nil && cm.Data[rootCertKey] == roots {
					continue
				}
				if err := writeRootCert(ctx, client, ns.Name, cm, roots); err != nil {
					log.Warn("writing the root certificate ConfigMap failed; retrying", "namespace", ns.Name, "err", err)
					failed = true
				}
			}
			retry := time.After(rootCertResync)
			if failed {
				retry = time.After(5 * time.Second)
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-dirty:
			case <-retry:
			}
		}
	}
}

// writeRootCert creates the ConfigMap, or updates the cached one (its
// resourceVersion makes a concurrent change a conflict, retried).
func writeRootCert(ctx context.Context, client kubernetes.Interface, ns string, cached *corev1.ConfigMap, roots string) error {
	api := client.CoreV1().ConfigMaps(ns)
	if cached == nil {
		_, err := api.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: rootCertConfigMap, Namespace: ns,
				Labels: map[string]string{"istio.io/config": "true"}},
			Data: map[string]string{rootCertKey: roots},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // the informer brings it; the next pass compares
		}
		return err
	}
	cm := cached.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[rootCertKey] = roots
	_, err := api.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
