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
// ConfigMaps for every input no --inject-* file gives, until ctx ends.
// Each ConfigMap is watched alone (a field selector on its name), so
// nothing else of the namespace is cached. A ConfigMap that is deleted
// leaves the last settings in force (as istiod does); one that does not
// parse is reported and changes nothing.
func watchInjectConfigMaps(ctx context.Context, client kubernetes.Interface, s *injectState) {
	injName, meshName := configMapNames(s.o.revision)
	ns := s.o.namespace
	log := s.log.With("namespace", ns, "configmaps", []string{injName, meshName})
	dirty := make(chan struct{}, 1)
	mark := func(any) {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: mark, UpdateFunc: func(_, o any) { mark(o) }, DeleteFunc: mark}
	watch := func(name string) (cache.SharedIndexInformer, informers.SharedInformerFactory) {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			}))
		inf := f.Core().V1().ConfigMaps().Informer()
		if _, err := inf.AddEventHandler(handler); err != nil {
			log.Error("configmap informer", "err", err)
		}
		return inf, f
	}
	injInf, injF := watch(injName)
	meshInf, meshF := watch(meshName)
	injF.Start(ctx.Done())
	meshF.Start(ctx.Done())
	defer injF.Shutdown()
	defer meshF.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), injInf.HasSynced, meshInf.HasSynced) {
		return
	}
	get := func(inf cache.SharedIndexInformer, name string) *corev1.ConfigMap {
		obj, ok, err := inf.GetStore().GetByKey(ns + "/" + name)
		if err != nil || !ok {
			return nil
		}
		cm, _ := obj.(*corev1.ConfigMap)
		return cm
	}
	// The versions last applied, so a resync or an unrelated event does
	// not re-parse (nor re-report) the same ConfigMaps.
	var injVersion, meshVersion string
	for {
		in := map[int]injectInput{}
		if s.o.configFile == "" {
			cm := get(injInf, injName)
			switch {
			case cm == nil && injVersion == "":
				log.Info("no injector ConfigMap yet: /inject answers 503 until it exists", "name", injName)
				injVersion = "absent"
			case cm == nil:
				if injVersion != "deleted" {
					log.Warn("injector ConfigMap deleted; keeping the last settings", "name", injName)
					injVersion = "deleted"
				}
			case cm.ResourceVersion != injVersion:
				injVersion = cm.ResourceVersion
				origin := "ConfigMap " + ns + "/" + injName + " key "
				in[inputConfig] = configMapKey(cm, "config", origin+"config")
				in[inputValues] = configMapKey(cm, "values", origin+"values")
			}
		}
		if s.o.meshFile == "" {
			if cm := get(meshInf, meshName); cm != nil && cm.ResourceVersion != meshVersion {
				meshVersion = cm.ResourceVersion
				// A mesh ConfigMap without the key is istiod's defaults.
				if _, ok := cm.Data["mesh"]; ok {
					in[inputMesh] = configMapKey(cm, "mesh", "ConfigMap "+ns+"/"+meshName+" key mesh")
				} else {
					in[inputMesh] = injectInput{}
				}
			}
		}
		if len(in) > 0 {
			_ = s.set(in) // logged, counted and reported
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
