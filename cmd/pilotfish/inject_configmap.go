package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// istiod's injector ConfigMaps: the injector's own (keys config and
// values) and the mesh config's (key mesh), both with a "-REVISION"
// suffix for a revision other than the default.
const (
	injectorConfigMap = "istio-sidecar-injector"
	meshConfigMap     = "istio"
)

// configMapNames are the injector's and the mesh's ConfigMap names for a
// revision, as istiod names them.
func configMapNames(revision string) (injector, mesh string) {
	if revision == "" || revision == "default" {
		return injectorConfigMap, meshConfigMap
	}
	return injectorConfigMap + "-" + revision, meshConfigMap + "-" + revision
}

// watchInjectConfigMaps keeps the injector's settings equal to its
// ConfigMap istio-sidecar-injector (keys config and values) unless
// --inject-config gives them, until ctx ends. It is watched alone (a
// field selector on its name), so nothing else of the namespace is
// cached. A ConfigMap that is deleted leaves the last settings in force
// (as istiod does); one that does not parse is reported and changes
// nothing. The mesh config (ConfigMap istio) is not watched here: the
// injector subscribes to the mesh config reader's (injectState.useMesh).
func watchInjectConfigMaps(ctx context.Context, client kubernetes.Interface, s *injectState) {
	injName, _ := configMapNames(s.o.revision)
	ns := s.o.namespace
	log := s.log.With("namespace", ns, "configmap", injName)
	dirty := make(chan struct{}, 1)
	mark := func(any) {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", injName).String()
		}))
	inf := f.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark, UpdateFunc: func(_, o any) { mark(o) }, DeleteFunc: mark}); err != nil {
		log.Error("configmap informer", "err", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	get := func() *corev1.ConfigMap {
		obj, ok, err := inf.GetStore().GetByKey(ns + "/" + injName)
		if err != nil || !ok {
			return nil
		}
		cm, _ := obj.(*corev1.ConfigMap)
		return cm
	}
	// The version last applied, so a resync or an unrelated event does
	// not re-parse (nor re-report) the same ConfigMap.
	var injVersion string
	for {
		cm := get()
		switch {
		case cm == nil && injVersion == "":
			log.Info("no injector ConfigMap yet: /inject answers 503 until it exists")
			injVersion = "absent"
		case cm == nil:
			if injVersion != "deleted" {
				log.Warn("injector ConfigMap deleted; keeping the last settings")
				injVersion = "deleted"
			}
		case cm.ResourceVersion != injVersion:
			injVersion = cm.ResourceVersion
			origin := "ConfigMap " + ns + "/" + injName + " key "
			_ = s.set(map[int]injectInput{ // logged, counted and reported
				inputConfig: configMapKey(cm, "config", origin+"config"),
				inputValues: configMapKey(cm, "values", origin+"values"),
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-dirty:
		}
	}
}

// configMapKey is one key of a ConfigMap as an injector input; a missing
// key is an input that does not parse (named in the error).
func configMapKey(cm *corev1.ConfigMap, key, origin string) injectInput {
	v, ok := cm.Data[key]
	return injectInput{data: []byte(v), origin: origin, set: true, missing: !ok}
}
