package ingest

import (
	"google.golang.org/protobuf/proto"
	extensionsv1alpha1 "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	telemetryv1 "istio.io/client-go/pkg/apis/telemetry/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	istioextensionsinformers "istio.io/client-go/pkg/informers/externalversions/extensions/v1alpha1"
	istionetworkinginformers "istio.io/client-go/pkg/informers/externalversions/networking/v1"
	istionetworkingv1alpha3informers "istio.io/client-go/pkg/informers/externalversions/networking/v1alpha3"
	istiosecurityinformers "istio.io/client-go/pkg/informers/externalversions/security/v1"
	istiotelemetryinformers "istio.io/client-go/pkg/informers/externalversions/telemetry/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The Istio kinds are watched at their v1 API versions: every Istio CRD
// since 1.22 serves v1 (its storage version), and the API server converts
// objects written as v1beta1 or v1alpha3, so one version sees them all.
// Typed informers of istio.io/client-go decode the JSON straight into the
// istio.io/api messages the converter reads, and cache those: a dynamic
// informer would cache unstructured maps (several times larger) and decode
// each object twice.
const (
	networkingGroupVersion = "networking.istio.io/v1"
	// EnvoyFilter is served at v1alpha3 only.
	networkingV1alpha3GroupVersion = "networking.istio.io/v1alpha3"
	securityGroupVersion           = "security.istio.io/v1"
	// WasmPlugin is served at v1alpha1 only.
	extensionsGroupVersion = "extensions.istio.io/v1alpha1"
	telemetryGroupVersion  = "telemetry.istio.io/v1"
)

// istioGroupVersions are the group-versions the source asks discovery
// about: those of istioKinds.
var istioGroupVersions = []string{networkingGroupVersion, networkingV1alpha3GroupVersion, securityGroupVersion, extensionsGroupVersion, telemetryGroupVersion}

// istioKind is one Istio kind the source watches once its CRD is served.
type istioKind struct {
	kind         Kind
	groupVersion string
	resource     string // plural, as discovery lists it
	newInformer  func(istioclient.Interface) cache.SharedIndexInformer
}

var istioKinds = []istioKind{
	{KindVirtualService, networkingGroupVersion, "virtualservices", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istionetworkinginformers.NewVirtualServiceInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindDestinationRule, networkingGroupVersion, "destinationrules", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istionetworkinginformers.NewDestinationRuleInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindGateway, networkingGroupVersion, "gateways", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istionetworkinginformers.NewGatewayInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindSidecar, networkingGroupVersion, "sidecars", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istionetworkinginformers.NewSidecarInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindEnvoyFilter, networkingV1alpha3GroupVersion, "envoyfilters", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istionetworkingv1alpha3informers.NewEnvoyFilterInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindWasmPlugin, extensionsGroupVersion, "wasmplugins", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istioextensionsinformers.NewWasmPluginInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindTelemetry, telemetryGroupVersion, "telemetries", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istiotelemetryinformers.NewTelemetryInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindServiceEntry, networkingGroupVersion, "serviceentries", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istionetworkinginformers.NewServiceEntryInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindWorkloadEntry, networkingGroupVersion, "workloadentries", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istionetworkinginformers.NewWorkloadEntryInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindAuthorizationPolicy, securityGroupVersion, "authorizationpolicies", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istiosecurityinformers.NewAuthorizationPolicyInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindPeerAuthentication, securityGroupVersion, "peerauthentications", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istiosecurityinformers.NewPeerAuthenticationInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
	{KindRequestAuthentication, securityGroupVersion, "requestauthentications", func(c istioclient.Interface) cache.SharedIndexInformer {
		return istiosecurityinformers.NewRequestAuthenticationInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}},
}

// coreKind is one Kubernetes kind the source always watches.
type coreKind struct {
	kind        Kind // KindUnknown for Nodes, which are not objects of the index
	newInformer func(kubernetes.Interface) cache.SharedIndexInformer
	transform   cache.TransformFunc
}

var coreKinds = []coreKind{
	{KindUnknown, func(c kubernetes.Interface) cache.SharedIndexInformer {
		return coreinformers.NewNodeInformer(c, 0, cache.Indexers{})
	}, transformNode},
	{KindNamespace, func(c kubernetes.Interface) cache.SharedIndexInformer {
		return coreinformers.NewNamespaceInformer(c, 0, cache.Indexers{})
	}, transformNamespace},
	{KindPod, func(c kubernetes.Interface) cache.SharedIndexInformer {
		return coreinformers.NewPodInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}, transformPod},
	{KindService, func(c kubernetes.Interface) cache.SharedIndexInformer {
		return coreinformers.NewServiceInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}, transformService},
	{KindEndpointSlice, func(c kubernetes.Interface) cache.SharedIndexInformer {
		return discoveryinformers.NewEndpointSliceInformer(c, metav1.NamespaceAll, 0, cache.Indexers{})
	}, transformEndpointSlice},
}

// secretKind is the Secret informer, started with KubeSourceOptions.Secrets:
// reading Secrets needs RBAC a deployment grants on purpose.
var secretKind = coreKind{KindSecret, func(c kubernetes.Interface) cache.SharedIndexInformer {
	return coreinformers.NewFilteredSecretInformer(c, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = secretFieldSelector })
}, transformSecret}

// secretFieldSelector leaves out the Secrets that are never gateway
// credentials and are the most numerous, as istiod's Secret controller
// does: service-account tokens and Helm release records.
const secretFieldSelector = "type!=kubernetes.io/service-account-token,type!=helm.sh/release.v1"

// kubeObject turns a cached (transformed) informer object into the Object
// the converter and Validate read. ok is false for a type the source does
// not convert.
func kubeObject(obj any) (o *Object, ok bool) {
	switch x := obj.(type) {
	case *corev1.Service:
		return &Object{Kind: KindService, APIVersion: "v1", Meta: x.ObjectMeta, Spec: x}, true
	case *kubeSlice:
		return &Object{Kind: KindEndpointSlice, APIVersion: "discovery.k8s.io/v1", Meta: x.ObjectMeta, Spec: x.slice()}, true
	case *kubePod:
		return &Object{Kind: KindPod, APIVersion: "v1", Meta: x.ObjectMeta, Spec: x.pod()}, true
	case *corev1.Namespace:
		return &Object{Kind: KindNamespace, APIVersion: "v1", Meta: x.ObjectMeta, Spec: x}, true
	case *corev1.Secret:
		return &Object{Kind: KindSecret, APIVersion: "v1", Meta: x.ObjectMeta, Spec: x}, true
	case *networkingv1.VirtualService:
		return istioObject(KindVirtualService, networkingGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *networkingv1.DestinationRule:
		return istioObject(KindDestinationRule, networkingGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *networkingv1.Gateway:
		return istioObject(KindGateway, networkingGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *networkingv1.Sidecar:
		return istioObject(KindSidecar, networkingGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *networkingv1alpha3.EnvoyFilter:
		return istioObject(KindEnvoyFilter, networkingV1alpha3GroupVersion, &x.ObjectMeta, &x.Spec), true
	case *extensionsv1alpha1.WasmPlugin:
		return istioObject(KindWasmPlugin, extensionsGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *telemetryv1.Telemetry:
		return istioObject(KindTelemetry, telemetryGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *networkingv1.ServiceEntry:
		return istioObject(KindServiceEntry, networkingGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *networkingv1.WorkloadEntry:
		return istioObject(KindWorkloadEntry, networkingGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *securityv1.AuthorizationPolicy:
		return istioObject(KindAuthorizationPolicy, securityGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *securityv1.PeerAuthentication:
		return istioObject(KindPeerAuthentication, securityGroupVersion, &x.ObjectMeta, &x.Spec), true
	case *securityv1.RequestAuthentication:
		return istioObject(KindRequestAuthentication, securityGroupVersion, &x.ObjectMeta, &x.Spec), true
	}
	return nil, false
}

// istioObject wraps an Istio object's spec. It has no Hash: the kube
// source tells changes by changed (kube_changes.go), and the converter
// hashes a config row itself (configHash).
func istioObject(kind Kind, apiVersion string, meta *metav1.ObjectMeta, spec proto.Message) *Object {
	return &Object{Kind: kind, APIVersion: apiVersion, Meta: *meta, Spec: spec}
}

// objectKey is the identity of an informer object of kind k.
func objectKey(k Kind, obj any) (ObjectKey, bool) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return ObjectKey{}, false
	}
	return ObjectKey{Kind: k, Namespace: m.GetNamespace(), Name: m.GetName()}, true
}

// tombstoneKey is the identity of a deleted object whose final state the
// informer missed (a relist found it gone): its key is "ns/name" or "name".
func tombstoneKey(k Kind, t cache.DeletedFinalStateUnknown) (ObjectKey, bool) {
	if key, ok := objectKey(k, t.Obj); ok {
		return key, true
	}
	ns, name, err := cache.SplitMetaNamespaceKey(t.Key)
	if err != nil || name == "" {
		return ObjectKey{}, false
	}
	return ObjectKey{Kind: k, Namespace: ns, Name: name}, true
}
