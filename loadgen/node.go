package loadgen

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// identity is what a simulated proxy says about itself, following the
// conventions of istio-agent's bootstrap so that istiod (and pilotfish)
// classify it as they would a real sidecar, gateway or gRPC client.
type identity struct {
	nodeID    string
	ip        string
	pod       string
	namespace string
	app       string
	labels    map[string]string
}

// identityOf returns proxy i's identity: proxy i is pod-i in namespace
// PREFIX-(i mod Namespaces) with app=load-(i mod Apps), at IPBase+1+i.
func (c *Config) identityOf(i int) identity {
	ip := addIP(c.IPBase, uint64(i)+1)
	ns := fmt.Sprintf("%s-%d", c.NamespacePrefix, i%c.Namespaces)
	id := identity{
		ip:        ip.String(),
		pod:       fmt.Sprintf("pod-%d", i),
		namespace: ns,
		app:       fmt.Sprintf("load-%d", i%c.Apps),
	}
	id.labels = map[string]string{"app": id.app, "version": "v1"}
	if c.Type == Router {
		id.labels["istio"] = "ingressgateway"
	}
	maps.Copy(id.labels, c.Labels)
	kind := "sidecar"
	if c.Type == Router {
		kind = "router"
	}
	id.nodeID = fmt.Sprintf("%s~%s~%s.%s~%s.svc.%s", kind, id.ip, id.pod, ns, ns, c.Domain)
	return id
}

// node builds proxy i's Node, sent on the first request of each stream and
// then dropped (it is not kept per proxy).
func (c *Config) node(i int) *corev3.Node {
	id := c.identityOf(i)
	labels := make(map[string]*structpb.Value, len(id.labels))
	for _, k := range slices.Sorted(maps.Keys(id.labels)) {
		labels[k] = structpb.NewStringValue(id.labels[k])
	}
	fields := map[string]*structpb.Value{
		"NAMESPACE":       structpb.NewStringValue(id.namespace),
		"LABELS":          structpb.NewStructValue(&structpb.Struct{Fields: labels}),
		"CLUSTER_ID":      structpb.NewStringValue(c.ClusterID),
		"ISTIO_VERSION":   structpb.NewStringValue(c.IstioVersion),
		"INSTANCE_IPS":    structpb.NewStringValue(id.ip),
		"WORKLOAD_NAME":   structpb.NewStringValue(id.app),
		"NAME":            structpb.NewStringValue(id.pod),
		"SERVICE_ACCOUNT": structpb.NewStringValue("default"),
		"MESH_ID":         structpb.NewStringValue(c.Domain),
		"OWNER": structpb.NewStringValue(fmt.Sprintf("kubernetes://apis/apps/v1/namespaces/%s/deployments/%s",
			id.namespace, id.app)),
	}
	n := &corev3.Node{
		Id:       id.nodeID,
		Cluster:  id.app + "." + id.namespace,
		Metadata: &structpb.Struct{Fields: fields},
	}
	if c.Type == GRPC {
		fields["GENERATOR"] = structpb.NewStringValue("grpc")
		n.UserAgentName = "gRPC Go"
		n.ClientFeatures = []string{"envoy.lb.does_not_support_overprovisioning", "xds.config.resource-in-sotw"}
	} else {
		n.UserAgentName = "envoy"
		n.ClientFeatures = []string{"envoy.lb.does_not_support_overprovisioning", "envoy.lrs.supports_send_all_clusters"}
	}
	return n
}

// addIP returns a+n, wrapping within the address family.
func addIP(a netip.Addr, n uint64) netip.Addr {
	b := a.AsSlice()
	for i := len(b) - 1; i >= 0 && n > 0; i-- {
		s := uint64(b[i]) + n&0xff
		b[i] = byte(s)
		n = n>>8 + s>>8
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}
