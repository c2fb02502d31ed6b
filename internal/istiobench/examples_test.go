package istiobench_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The example mesh that `make run` serves lives in ../../examples. These
// tests keep it well-formed and self-consistent, since nothing else reads it
// at test time: each file is strict multi-document YAML, every object is
// named, and the Kubernetes objects agree with each other the way a real
// cluster's would (slices point at existing Pods with the same IPs, nodes
// and ports; Pods run as existing ServiceAccounts; and so on).

const examplesDir = "../../examples"

// object is the part of a Kubernetes or Istio object the checks read.
type object struct {
	file string
	line int

	header `yaml:",inline"`
	kube   `yaml:",inline"` // decoded for core and discovery.k8s.io objects only
}

// header is what every object has.
type header struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
}

// kube holds the fields of Services, Pods and EndpointSlices that the
// consistency checks compare.
type kube struct {
	Spec struct {
		Selector           map[string]any `yaml:"selector"`
		ServiceAccountName string         `yaml:"serviceAccountName"`
		NodeName           string         `yaml:"nodeName"`
		Ports              []servicePort  `yaml:"ports"`
	} `yaml:"spec"`
	Status struct {
		PodIP string `yaml:"podIP"`
	} `yaml:"status"`

	AddressType string `yaml:"addressType"`
	Ports       []struct {
		Name string `yaml:"name"`
		Port int    `yaml:"port"`
	} `yaml:"ports"`
	Endpoints []struct {
		Addresses  []string `yaml:"addresses"`
		Conditions struct {
			Ready *bool `yaml:"ready"`
		} `yaml:"conditions"`
		NodeName  string `yaml:"nodeName"`
		Zone      string `yaml:"zone"`
		TargetRef struct {
			Kind      string `yaml:"kind"`
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
		} `yaml:"targetRef"`
	} `yaml:"endpoints"`
}

type servicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort any    `yaml:"targetPort"`
}

func (o *object) String() string {
	return fmt.Sprintf("%s:%d: %s %s/%s", o.file, o.line, o.Kind, o.Metadata.Namespace, o.Metadata.Name)
}

func (o *object) key() string { return o.Kind + " " + o.Metadata.Namespace + "/" + o.Metadata.Name }

var clusterScoped = map[string]bool{"Namespace": true, "Node": true}

// loadExamples parses every .yaml file under examplesDir, failing on syntax
// errors, unknown document shapes and objects without apiVersion, kind or
// metadata.name.
func loadExamples(t *testing.T) []*object {
	t.Helper()
	var objs []*object
	files := 0
	err := filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(examplesDir, path)
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("%s: document %d: %v", rel, i, err)
				break
			}
			if len(n.Content) == 0 || n.Content[0].ShortTag() == "!!null" {
				t.Errorf("%s: document %d is empty", rel, i)
				continue
			}
			root := n.Content[0]
			o := &object{file: rel, line: root.Line}
			// Decoding into a struct rejects repeated keys, which lenient
			// readers would silently merge.
			err = root.Decode(&o.header)
			if err == nil && (o.APIVersion == "v1" || o.APIVersion == "discovery.k8s.io/v1") {
				err = root.Decode(o)
			}
			if err != nil {
				t.Errorf("%s:%d: %v", rel, o.line, err)
				continue
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s:%d: missing apiVersion, kind or metadata.name", rel, o.line)
				continue
			}
			objs = append(objs, o)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", examplesDir, err)
	}
	if files == 0 {
		t.Fatalf("no .yaml files under %s", examplesDir)
	}
	return objs
}

func TestExamplesParse(t *testing.T) {
	objs := loadExamples(t)
	seen := map[string]*object{}
	for _, o := range objs {
		if prev, dup := seen[o.key()]; dup {
			t.Errorf("%v: duplicate of %v", o, prev)
		}
		seen[o.key()] = o
		if clusterScoped[o.Kind] != (o.Metadata.Namespace == "") {
			t.Errorf("%v: namespace set on a cluster-scoped kind, or missing on a namespaced one", o)
		}
	}
}

// TestExamplesConsistent checks the references between the Kubernetes
// objects of the example mesh.
func TestExamplesConsistent(t *testing.T) {
	objs := loadExamples(t)
	byKey := map[string]*object{}
	for _, o := range objs {
		byKey[o.key()] = o
	}
	get := func(kind, ns, name string) *object { return byKey[kind+" "+ns+"/"+name] }

	slicesOf := map[string]int{} // "ns/service" -> EndpointSlices
	for _, o := range objs {
		ns := o.Metadata.Namespace
		if ns != "" && get("Namespace", "", ns) == nil {
			t.Errorf("%v: namespace %q is not defined", o, ns)
		}
		switch o.Kind {
		case "Pod":
			if o.Metadata.Labels["app"] == "" {
				t.Errorf("%v: no app label", o)
			}
			if o.Status.PodIP == "" || o.Spec.NodeName == "" {
				t.Errorf("%v: no status.podIP or spec.nodeName", o)
			}
			if get("Node", "", o.Spec.NodeName) == nil {
				t.Errorf("%v: node %q is not defined", o, o.Spec.NodeName)
			}
			if get("ServiceAccount", ns, o.Spec.ServiceAccountName) == nil {
				t.Errorf("%v: service account %q is not defined", o, o.Spec.ServiceAccountName)
			}

		case "EndpointSlice":
			svcName := o.Metadata.Labels["kubernetes.io/service-name"]
			svc := get("Service", ns, svcName)
			if svc == nil {
				t.Errorf("%v: kubernetes.io/service-name %q names no Service", o, svcName)
				continue
			}
			slicesOf[ns+"/"+svcName]++
			if o.AddressType != "IPv4" {
				t.Errorf("%v: addressType %q, want IPv4", o, o.AddressType)
			}
			for _, p := range o.Ports {
				if !slices.ContainsFunc(svc.Spec.Ports, func(sp servicePort) bool {
					return sp.Name == p.Name && fmt.Sprint(sp.TargetPort) == fmt.Sprint(p.Port)
				}) {
					t.Errorf("%v: port %s/%d matches no port name and targetPort of %v", o, p.Name, p.Port, svc)
				}
			}
			if n := len(o.Endpoints); n < 2 || n > 3 {
				t.Errorf("%v: %d endpoints, want 2 or 3", o, n)
			}
			for _, ep := range o.Endpoints {
				ref := ep.TargetRef
				pod := get("Pod", ref.Namespace, ref.Name)
				switch {
				case ref.Kind != "Pod" || ref.Namespace != ns || pod == nil:
					t.Errorf("%v: targetRef %+v is not a Pod of the namespace", o, ref)
				case len(ep.Addresses) != 1 || ep.Addresses[0] != pod.Status.PodIP:
					t.Errorf("%v: endpoint %v, but %v has podIP %s", o, ep.Addresses, pod, pod.Status.PodIP)
				case ep.NodeName != pod.Spec.NodeName:
					t.Errorf("%v: endpoint on node %s, but %v runs on %s", o, ep.NodeName, pod, pod.Spec.NodeName)
				case !selects(svc.Spec.Selector, pod.Metadata.Labels):
					t.Errorf("%v: %v does not match the selector of %v", o, pod, svc)
				}
				if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
					t.Errorf("%v: endpoint %v is not ready", o, ep.Addresses)
				}
				if node := get("Node", "", ep.NodeName); node == nil || node.Metadata.Labels["topology.kubernetes.io/zone"] != ep.Zone {
					t.Errorf("%v: endpoint zone %q is not the zone of node %q", o, ep.Zone, ep.NodeName)
				}
			}
		}
	}
	for _, o := range objs {
		if o.Kind == "Service" && len(o.Spec.Selector) > 0 && slicesOf[o.Metadata.Namespace+"/"+o.Metadata.Name] == 0 {
			t.Errorf("%v: no EndpointSlice", o)
		}
	}
}

func selects(selector map[string]any, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != fmt.Sprint(v) {
			return false
		}
	}
	return len(selector) > 0
}
