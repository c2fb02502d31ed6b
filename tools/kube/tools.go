//go:build tools

// Package tools pins the Kubernetes test binaries that `make kube-bins`
// builds into .cache/kube/bin for internal/kubetest: kube-apiserver and
// kubectl from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3. A
// module of its own so that k8s.io/kubernetes never enters pilotfish's
// go.mod. Nothing imports it.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
