package envoypatch

import (
	"regexp"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// maxProxyVersionLen is istiod's bound on a proxyVersion expression: a
// longer one is not compiled (compiling is costly) and its patch matches
// no proxy.
const maxProxyVersionLen = 1024

// proxyMatcher is a patch's match.proxy compiled once.
type proxyMatcher struct {
	set      bool           // match.proxy present
	never    bool           // proxyVersion too long to compile: matches no proxy
	prefix   string         // proxyVersion of istiod's well-known form ^1\.NN.*
	re       *regexp.Regexp // any other proxyVersion
	metadata map[string]string
}

// wellKnownVersion is the form istiod matches by prefix, not by regular
// expression (its wellKnownVersions table lists 1.16 to 1.23; the prefix is
// what the expression means for any minor, so every one takes it here).
var wellKnownVersion = regexp.MustCompile(`^\^1\\\.([0-9]{1,3})\.\*$`)

func compileProxyMatch(pm *networking.EnvoyFilter_ProxyMatch) proxyMatcher {
	m := proxyMatcher{set: true, metadata: pm.GetMetadata()}
	v := pm.GetProxyVersion()
	switch {
	case v == "":
	case wellKnownVersion.MatchString(v):
		m.prefix = "1." + wellKnownVersion.FindStringSubmatch(v)[1]
	case len(v) > maxProxyVersionLen:
		m.never = true
	default:
		// An expression that does not compile is a validation error; a
		// row that got here anyway matches any version, as in istiod.
		m.re, _ = regexp.Compile(v)
	}
	return m
}

// MatchesProxy reports whether the patch's match.proxy selects a proxy of
// this Istio version (its ISTIO_VERSION metadata) and metadata (a lookup of
// its raw metadata's string values; "" for a key it lacks or whose value is
// not a string), with istiod's rules: no proxy match selects every proxy; a
// proxyVersion selects proxies whose version it matches (none when the
// proxy has no version); every metadata entry must equal the proxy's.
func (p *Patch) MatchesProxy(istioVersion string, metadata func(string) string) bool {
	m := &p.proxy
	if !m.set {
		return true
	}
	switch {
	case m.never:
		return false
	case m.prefix != "" && !strings.HasPrefix(istioVersion, m.prefix):
		return false
	case m.re != nil && (istioVersion == "" || !m.re.MatchString(istioVersion)):
		return false
	}
	for k, v := range m.metadata {
		if metadata == nil || metadata(k) != v {
			return false
		}
	}
	return true
}

// ProxyMetadataKeys are the metadata keys the patch's match.proxy reads
// (nil when none): a class must hold these to decide MatchesProxy.
func (p *Patch) ProxyMetadataKeys() []string {
	if len(p.proxy.metadata) == 0 {
		return nil
	}
	keys := make([]string, 0, len(p.proxy.metadata))
	for k := range p.proxy.metadata {
		keys = append(keys, k)
	}
	return keys
}

// MatchesProxyVersion reports whether the patch has a match.proxy that
// reads the proxy's version (so a class must hold it).
func (p *Patch) MatchesProxyVersion() bool {
	return p.proxy.never || p.proxy.prefix != "" || p.proxy.re != nil
}
