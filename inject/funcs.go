package inject

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	meshconfig "istio.io/api/mesh/v1alpha1"
)

// templateFuncs is the function set istiod gives injection templates:
// sprig's text functions, then istiod's own, which win where the names
// clash (contains takes its arguments flipped, indent leaves the first
// line alone). A user's customised template keeps working only if every
// name here means what it means in istiod, so the set is pinned by
// TestTemplateFuncsMatchIstiod.
var templateFuncs = func() template.FuncMap {
	m := sprig.TxtFuncMap()
	maps.Copy(m, template.FuncMap{
		"formatDuration":         formatDuration,
		"isset":                  isset,
		"excludeInboundPort":     excludeInboundPort,
		"includeInboundPorts":    includeInboundPorts,
		"kubevirtInterfaces":     identity,
		"excludeInterfaces":      identity,
		"applicationPorts":       applicationPorts,
		"annotation":             annotationOr,
		"valueOrDefault":         valueOrDefault,
		"toJSON":                 stringMapJSON,
		"fromJSON":               fromJSON,
		"structToJSON":           structToJSON,
		"protoToJSON":            protoToJSON,
		"toYaml":                 toYAML,
		"indent":                 indentTail,
		"directory":              directory,
		"contains":               func(needle, haystack string) bool { return strings.Contains(haystack, needle) },
		"toLower":                strings.ToLower,
		"appendMultusNetwork":    appendMultusNetwork,
		"env":                    envOr,
		"omit":                   omitKeys,
		"strdict":                strdict,
		"toJsonMap":              func(ms ...map[string]string) string { return mustJSON(mergeMaps(ms...), "") },
		"mergeMaps":              mergeMaps,
		"omitNil":                omitNil,
		"otelResourceAttributes": otelResourceAttributes,
	})
	return m
}()

// istiodFuncNames are the names istiod adds to sprig's (its template.go).
var istiodFuncNames = []string{
	"formatDuration", "isset", "excludeInboundPort", "includeInboundPorts", "kubevirtInterfaces",
	"excludeInterfaces", "applicationPorts", "annotation", "valueOrDefault", "toJSON", "fromJSON",
	"structToJSON", "protoToJSON", "toYaml", "indent", "directory", "contains", "toLower",
	"appendMultusNetwork", "env", "omit", "strdict", "toJsonMap", "mergeMaps", "omitNil",
	"otelResourceAttributes",
}

func identity(s string) string { return s }

// envOr reads the injector process's environment, as istiod's env does.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func formatDuration(d *durationpb.Duration) string { return d.AsDuration().String() }

func isset(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok
}

func directory(p string) string {
	dir, _ := path.Split(p)
	return dir
}

// excludeInboundPort adds port to a comma-separated list unless it is
// there already or is empty or 0.
func excludeInboundPort(port any, list string) string {
	p := strings.TrimSpace(fmt.Sprint(port))
	if p == "" || p == "0" {
		return list
	}
	parts := strings.Split(list, ",")
	kept := make([]string, 0, len(parts)+1)
	for _, q := range parts {
		if q == p {
			return list
		}
		if q = strings.TrimSpace(q); q != "" {
			kept = append(kept, q)
		}
	}
	return strings.Join(append(kept, p), ",")
}

// containerPorts lists the TCP container ports of the containers keep
// accepts (UDP and SCTP ports are never intercepted).
func containerPorts(cs []corev1.Container, keep func(*corev1.Container) bool) string {
	var out []string
	for i := range cs {
		if !keep(&cs[i]) {
			continue
		}
		for _, p := range cs[i].Ports {
			if p.Protocol == corev1.ProtocolUDP || p.Protocol == corev1.ProtocolSCTP {
				continue
			}
			out = append(out, strconv.Itoa(int(p.ContainerPort)))
		}
	}
	return strings.Join(out, ",")
}

func includeInboundPorts(cs []corev1.Container) string {
	return containerPorts(cs, func(*corev1.Container) bool { return true })
}

func applicationPorts(cs []corev1.Container) string {
	return containerPorts(cs, func(c *corev1.Container) bool { return c.Name != proxyName })
}

// annotationOr is a pod annotation, or def printed when it is absent.
func annotationOr(meta metav1.ObjectMeta, name string, def any) string {
	if v, ok := meta.Annotations[name]; ok {
		return v
	}
	return fmt.Sprint(def)
}

func valueOrDefault(v, def any) any {
	if v == nil || v == "" {
		return def
	}
	return v
}

func mustJSON(v any, onError string) string {
	b, err := json.Marshal(v)
	if err != nil {
		return onError
	}
	return string(b)
}

func stringMapJSON(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	return mustJSON(m, "{}")
}

func structToJSON(v any) string {
	if v == nil {
		return "{}"
	}
	return mustJSON(v, "{}")
}

// fromJSON decodes JSON; on error it returns the string "{}", as istiod's
// does (templates range over the result, and ranging over a string of
// two bytes yields two entries: kept for compatibility).
func fromJSON(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return "{}"
	}
	return v
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// indentTail indents every line but the first by n spaces.
func indentTail(n int, s string) string {
	lines := strings.Split(s, "\n")
	pad := strings.Repeat(" ", max(n, 0))
	for i := 1; i < len(lines); i++ {
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "\n")
}

// appendMultusNetwork adds the istio-cni network (ns/name or name) to a
// pod's k8s.v1.cni.cncf.io/networks value, a JSON list or a comma list,
// unless it is there already.
func appendMultusNetwork(existing, network string) string {
	if existing == "" {
		return network
	}
	ns, name := "", network
	if i := strings.IndexByte(network, '/'); i >= 0 {
		ns, name = network[:i], network[i+1:]
	}
	if end := strings.LastIndex(existing, "]"); end >= 0 {
		var nets []map[string]any
		if err := json.Unmarshal([]byte(existing), &nets); err != nil {
			return existing // not ours to repair
		}
		for _, n := range nets {
			if n["name"] != name {
				continue
			}
			have := n["namespace"]
			if have == nil {
				have = ""
			}
			if have == ns {
				return existing
			}
		}
		entry := fmt.Sprintf(`, {"name": "%s"}`, name)
		if ns != "" {
			entry = fmt.Sprintf(`, {"name": "%s", "namespace": "%s"}`, name, ns)
		}
		return existing[:end] + entry + existing[end:]
	}
	for _, n := range strings.Split(existing, ",") {
		if strings.TrimSpace(n) == network {
			return existing
		}
	}
	return existing + ", " + network
}

func omitKeys(m map[string]string, keys ...string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// strdict is sprig's dict with string values (for labels and
// annotations); a trailing key gets "".
func strdict(kv ...string) map[string]string {
	out := make(map[string]string, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		if i+1 < len(kv) {
			out[kv[i]] = kv[i+1]
		} else {
			out[kv[i]] = ""
		}
	}
	return out
}

// mergeMaps merges maps, later ones winning; nil with no maps.
func mergeMaps(ms ...map[string]string) map[string]string {
	if len(ms) == 0 {
		return nil
	}
	out := make(map[string]string, len(ms[0]))
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// omitNil drops nil values from nested maps and lists; a map or list left
// empty by that becomes nil itself. Values without nils are returned as
// they are (not copied).
func omitNil(v any) any {
	out, _ := dropNils(v)
	return out
}

func dropNils(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case map[string]any:
		changed := false
		for _, e := range x {
			if _, c := dropNils(e); c {
				changed = true
				break
			}
		}
		if !changed {
			return x, false
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if f, _ := dropNils(e); f != nil {
				out[k] = f
			}
		}
		if len(out) == 0 {
			return nil, true
		}
		return out, true
	case []any:
		changed := false
		for _, e := range x {
			if _, c := dropNils(e); c {
				changed = true
				break
			}
		}
		if !changed {
			return x, false
		}
		out := make([]any, 0, len(x))
		for _, e := range x {
			if f, _ := dropNils(e); f != nil {
				out = append(out, f)
			}
		}
		if len(out) == 0 {
			return nil, true
		}
		return out, true
	}
	return v, false
}

// otelResourceAttributes is OTEL_RESOURCE_ATTRIBUTES for the proxy when an
// OpenTelemetry tracing provider asks for OTel semantic conventions
// ("" otherwise): service.namespace, service.version and
// service.instance.id, from the resource.opentelemetry.io annotations
// first, then the namespace, version label or image, and the first
// container's name.
func otelResourceAttributes(mc *meshconfig.MeshConfig, annotations, lbls map[string]string, namespace string, cs []corev1.Container) string {
	on := false
	for _, p := range mc.GetExtensionProviders() {
		if p.GetOpentelemetry().GetServiceAttributeEnrichment() == meshconfig.MeshConfig_ExtensionProvider_OTEL_SEMANTIC_CONVENTIONS {
			on = true
			break
		}
	}
	if !on {
		return ""
	}
	const pfx = "resource.opentelemetry.io/"
	var attrs []string
	switch {
	case annotations[pfx+"service.namespace"] != "":
		attrs = append(attrs, "service.namespace="+annotations[pfx+"service.namespace"])
	case namespace != "":
		attrs = append(attrs, "service.namespace="+namespace)
	}
	switch {
	case annotations[pfx+"service.version"] != "":
		attrs = append(attrs, "service.version="+annotations[pfx+"service.version"])
	case lbls["app.kubernetes.io/version"] != "":
		attrs = append(attrs, "service.version="+lbls["app.kubernetes.io/version"])
	case len(cs) == 1:
		tag, digest := imageTagDigest(cs[0].Image)
		switch {
		case tag != "" && digest != "":
			attrs = append(attrs, "service.version="+tag+"@"+digest)
		case digest != "":
			attrs = append(attrs, "service.version="+digest)
		case tag != "":
			attrs = append(attrs, "service.version="+tag)
		}
	}
	switch {
	case annotations[pfx+"service.instance.id"] != "":
		attrs = append(attrs, "service.instance.id="+annotations[pfx+"service.instance.id"])
	case len(cs) > 0:
		attrs = append(attrs, "service.instance.id="+namespace+".$(POD_NAME)."+cs[0].Name)
	}
	return strings.Join(attrs, ",")
}

// imageTagDigest splits [registry[:port]/]name[:tag][@digest].
func imageTagDigest(image string) (tag, digest string) {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image, digest = image[:i], image[i+1:]
	}
	if c := strings.LastIndexByte(image, ':'); c > strings.LastIndexByte(image, '/') {
		tag = image[c+1:]
	}
	return tag, digest
}

// protoToJSON renders a proto as istiod does (golang/protobuf's jsonpb,
// camelCase names, no defaults); a ProxyConfig first loses the fields
// equal to istiod's defaults, so PROXY_CONFIG carries only what differs.
func protoToJSON(m proto.Message) string {
	if pc, ok := m.(*meshconfig.ProxyConfig); ok {
		if pc == nil {
			return "{}"
		}
		m = trimProxyDefaults(pc)
	}
	if m == nil {
		return "{}"
	}
	s, err := marshalJSONPB(m)
	if err != nil {
		return "{}"
	}
	return s
}
