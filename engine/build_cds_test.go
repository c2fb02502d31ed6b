package engine

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

func newCluster() *clusterv3.Cluster { return &clusterv3.Cluster{} }
