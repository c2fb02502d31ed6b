package main

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/pilotfish-mesh/pilotfish/meshconfig"
)

// meshPollEvery is how often the mesh config file and the config
// directory's ConfigMap istio are checked for changes.
const meshPollEvery = 2 * time.Second

// readMeshFile reads --mesh-config as an input.
func readMeshFile(path string) meshInput {
	data, err := readBounded(path)
	if err != nil {
		// A file that cannot be read is a document that does not parse.
		return meshInput{origin: path, mesh: []byte("\x00unreadable: " + err.Error()), present: true}
	}
	return meshInput{origin: path, mesh: data, present: true}
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, meshconfig.MaxSize+1))
}

// findDirConfigMap looks in the config directory's YAML files for
// ConfigMap name (any namespace), as the mesh config of `make run`'s
// example mesh; the first found in lexical file order wins.
func findDirConfigMap(dir, name string) meshInput {
	if found := scanConfigMaps(dir, name, false); len(found) > 0 {
		return found[0]
	}
	return meshInput{}
}

// scanConfigMaps returns the ConfigMaps called name in root's YAML files
// (root itself when it is a file, whatever its extension), in lexical
// file order: the first only unless all. Each input's problems are
// located in its file (mesh key's line).
func scanConfigMaps(root, name string, all bool) []meshInput {
	var found []meshInput
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || (len(found) > 0 && !all) {
			return nil
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); (p != root && ext != ".yaml" && ext != ".yml") || !d.Type().IsRegular() {
			return nil // a FIFO or device would block the read
		}
		data, err := readBounded(p)
		if err != nil || !bytes.Contains(data, []byte("ConfigMap")) {
			return nil
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for len(found) == 0 || all {
			var doc yaml.Node
			if err := dec.Decode(&doc); err != nil {
				break
			}
			var cm struct {
				Kind     string            `yaml:"kind"`
				Metadata metav1.ObjectMeta `yaml:"metadata"`
				Data     map[string]string `yaml:"data"`
			}
			if doc.Decode(&cm) != nil || cm.Kind != "ConfigMap" || cm.Metadata.Name != name {
				continue
			}
			m, ok := cm.Data["mesh"]
			found = append(found, meshInput{origin: p + ": ConfigMap " + cm.Metadata.Namespace + "/" + name + " key mesh",
				mesh: []byte(m), networks: []byte(cm.Data["meshNetworks"]), present: ok || cm.Data != nil,
				file: p, lineOffset: meshKeyOffset(&doc), namespace: cm.Metadata.Namespace, name: name})
		}
		return nil
	})
	return found
}

// meshKeyOffset is what turns a line of the `mesh` key's document into
// a line of the file: the line of a block scalar's "|" (its document
// starts on the next), or the line before a scalar's first.
func meshKeyOffset(doc *yaml.Node) int {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	data := mappingValue(doc, "data")
	if data == nil {
		return 0
	}
	v := mappingValue(data, "mesh")
	switch {
	case v == nil:
		return 0
	case v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return v.Line
	default:
		return v.Line - 1
	}
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// pollMesh re-reads the file and the config directory until ctx ends,
// applying what changed.
func pollMesh(ctx context.Context, s *meshState, file, dir, cmName string, lastFile, lastDir meshInput) {
	check := func() {
		if file != "" {
			if in := readMeshFile(file); !sameInput(in, lastFile) {
				lastFile = in
				_ = s.set(meshFromFile, in)
			}
		}
		if dir != "" {
			if in := findDirConfigMap(dir, cmName); !sameInput(in, lastDir) {
				lastDir = in
				_ = s.set(meshFromDir, in)
			}
		}
	}
	t := time.NewTicker(meshPollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			check()
		}
	}
}

func sameInput(a, b meshInput) bool {
	return a.present == b.present && a.origin == b.origin && bytes.Equal(a.mesh, b.mesh) && bytes.Equal(a.networks, b.networks)
}

// watchMeshConfigMap keeps the API server's input equal to ConfigMap
// name in ns (watched alone, by a field selector), until ctx ends. A
// deleted ConfigMap leaves the last config in force, as istiod does.
func watchMeshConfigMap(ctx context.Context, client kubernetes.Interface, s *meshState, ns, name string) {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := f.Core().V1().ConfigMaps().Informer()
	onCM := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		_, has := cm.Data["mesh"]
		_ = s.set(meshFromAPI, meshInput{origin: "ConfigMap " + ns + "/" + name + " key mesh", mesh: []byte(cm.Data["mesh"]),
			networks: []byte(cm.Data["meshNetworks"]), present: has || cm.Data != nil})
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onCM,
		UpdateFunc: func(_, o any) { onCM(o) },
		DeleteFunc: func(any) {
			s.log.Warn("mesh ConfigMap deleted; keeping the last mesh config", "namespace", ns, "name", name)
		},
	})
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
}

// initialMeshConfigMap reads ConfigMap name once (bounded in time), so
// that the mesh config is in force before the first proxy connects and
// the CA starts.
func initialMeshConfigMap(ctx context.Context, client kubernetes.Interface, ns, name string) meshInput {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return meshInput{}
	}
	_, has := cm.Data["mesh"]
	return meshInput{origin: "ConfigMap " + ns + "/" + name + " key mesh", mesh: []byte(cm.Data["mesh"]),
		networks: []byte(cm.Data["meshNetworks"]), present: has || cm.Data != nil}
}
