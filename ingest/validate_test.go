package ingest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// doc builds a manifest of kind (apiVersion chosen by kind) named name,
// with body as its spec (or, for EndpointSlice, its top-level fields).
func doc(kind, name, body string) string {
	av := map[string]string{
		"Service": "v1", "Pod": "v1", "Namespace": "v1", "EndpointSlice": "discovery.k8s.io/v1",
		"AuthorizationPolicy": "security.istio.io/v1", "PeerAuthentication": "security.istio.io/v1",
		"RequestAuthentication": "security.istio.io/v1", "EnvoyFilter": "networking.istio.io/v1alpha3",
		"WasmPlugin": "extensions.istio.io/v1alpha1",
	}[kind]
	if av == "" {
		av = "networking.istio.io/v1"
	}
	out := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n", av, kind, name)
	if kind == "EndpointSlice" {
		return out + "  labels: {kubernetes.io/service-name: svc}\n" + body
	}
	if body != "" {
		out += "spec:\n" + indent(body)
	}
	return out
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// validate decodes in (which must decode cleanly) and validates it.
func validate(t *testing.T, in string) []error {
	t.Helper()
	objs, errs := ingest.Decode("v.yaml", []byte(in))
	if len(errs) > 0 {
		t.Fatalf("Decode: %s", errStrings(errs))
	}
	if len(objs) != 1 {
		t.Fatalf("Decode: %d objects, want 1", len(objs))
	}
	return ingest.Validate(&objs[0])
}

type ruleCase struct {
	name string
	in   string
	want string // "" for valid, else "field: message" (a substring of the only error)
}

func runRules(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := validate(t, tc.in)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("want valid, got:\n%s", errStrings(errs))
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("want one error containing %q, got:\n%s", tc.want, errStrings(errs))
			}
			e := asError(t, errs[0])
			if !errors.Is(e, ingest.ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid")
			}
		})
	}
}

const route = "http: [{route: [{destination: {host: reviews}}]}]"

func TestValidateMetadata(t *testing.T) {
	runRules(t, []ruleCase{
		{"subdomain name ok", doc("DestinationRule", "reviews.v1", "host: reviews"), ""},
		{"name not a subdomain", doc("DestinationRule", "Reviews_V1", "host: reviews"), `metadata.name: invalid name "Reviews_V1": must be a DNS-1123 subdomain`},
		{"name required", strings.Replace(doc("DestinationRule", "x", "host: reviews"), "name: x", "namespace: ns", 1), "metadata.name: required"},
		{"service name is a DNS-1035 label", doc("Service", "1reviews", "ports: [{port: 80}]"), `metadata.name: invalid name "1reviews": must be a DNS-1035 label`},
		{"namespace name is a label", doc("Namespace", "a.b", ""), `invalid name "a.b": must be a DNS-1123 label`},
		{"gateway name has no dots", doc("Gateway", "gw.x", "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]"), `invalid Gateway name "gw.x"`},
		{"namespace must be a label", strings.Replace(doc("DestinationRule", "x", "host: r"), "name: x", "name: x\n  namespace: My_NS", 1), `metadata.namespace: invalid name "My_NS"`},
		{"labels ok", strings.Replace(doc("DestinationRule", "x", "host: r"), "name: x", "name: x\n  labels: {app.kubernetes.io/name: r, version: v1}", 1), ""},
		{"label key invalid", strings.Replace(doc("DestinationRule", "x", "host: r"), "name: x", "name: x\n  labels: {'bad key': v}", 1), `metadata.labels[bad key]: invalid label key "bad key"`},
		{"label value invalid", strings.Replace(doc("DestinationRule", "x", "host: r"), "name: x", "name: x\n  labels: {app: 'a b'}", 1), `metadata.labels[app]: invalid label value "a b"`},
		{"dry-run only on AuthorizationPolicy", strings.Replace(doc("DestinationRule", "x", "host: r"), "name: x", "name: x\n  annotations: {istio.io/dry-run: 'true'}", 1), "only AuthorizationPolicy supports the istio.io/dry-run annotation"},
	})
}

func TestValidateVirtualService(t *testing.T) {
	vs := func(spec string) string { return doc("VirtualService", "vs", spec) }
	runRules(t, []ruleCase{
		{"minimal", vs("hosts: [reviews]\n" + route), ""},
		{"hosts wildcard", vs("hosts: ['*.example.com']\n" + route), ""},
		{"host invalid", vs("hosts: [re_views]\n" + route), `spec.hosts[0]: invalid host "re_views"`},
		{"wildcard not leading", vs("hosts: ['foo.*.com']\n" + route), `invalid host "foo.*.com": label "*" is not a valid DNS label`},
		{"ip host allowed", vs("hosts: [10.0.0.1]\n" + route), ""},
		{"* host on mesh", vs("hosts: ['*']\n" + route), "wildcard host * is not allowed"},
		{"* host on gateway", vs("hosts: ['*']\ngateways: [istio-system/gw]\n" + route), ""},
		{"duplicate hosts", vs("hosts: [a.example.com, '*.example.com']\n" + route), `spec.hosts[1]: duplicate host`},
		{"no routes", vs("hosts: [reviews]"), "spec: at least one of http, tcp or tls routes is required"},
		{"gateway name invalid", vs("hosts: [r]\ngateways: [ns/Gw_1]\n" + route), `invalid gateway "ns/Gw_1"`},
		{"route needed", vs("hosts: [r]\nhttp: [{name: x}]"), "spec.http[0].route: one of route, redirect or directResponse is required"},
		{"destination host required", vs("hosts: [r]\nhttp: [{route: [{destination: {subset: v1}}]}]"), "spec.http[0].route[0].destination.host: required"},
		{"destination required", vs("hosts: [r]\nhttp: [{route: [{weight: 10}]}]"), "spec.http[0].route[0].destination: required"},
		{"destination host *", vs("hosts: [r]\nhttp: [{route: [{destination: {host: '*'}}]}]"), `destination.host: invalid host "*"`},
		{"weights relative", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}, weight: 60}, {destination: {host: b}, weight: 60}]}]"), ""},
		{"weight negative", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}, weight: -1}]}]"), "spec.http[0].route[0].weight: must not be negative"},
		{"weights all zero", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}, {destination: {host: b}}]}]"), "spec.http[0].route: the weights of 2 destinations add up to 0"},
		{"port ok", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a, port: {number: 8080}}}]}]"), ""},
		{"port out of range", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a, port: {number: 70000}}}]}]"), "destination.port.number: port number must be between 1 and 65535, not 70000"},
		{"subset invalid", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a, subset: v_1}}]}]"), `invalid subset name "v_1"`},
		{"regex ok", vs("hosts: [r]\nhttp: [{match: [{uri: {regex: '^/a/[0-9]+$'}}], route: [{destination: {host: a}}]}]"), ""},
		{"regex invalid", vs("hosts: [r]\nhttp: [{match: [{uri: {regex: '(a'}}], route: [{destination: {host: a}}]}]"), "spec.http[0].match[0].uri.regex: invalid RE2 regex: missing closing )"},
		{"empty prefix on header", vs("hosts: [r]\nhttp: [{match: [{headers: {x-a: {prefix: ''}}}], route: [{destination: {host: a}}]}]"), "headers[x-a].prefix: must not be empty"},
		{"empty prefix on uri ok", vs("hosts: [r]\nhttp: [{match: [{uri: {prefix: ''}}], route: [{destination: {host: a}}]}]"), ""},
		{"header name invalid", vs("hosts: [r]\nhttp: [{match: [{headers: {'x a': {exact: b}}}], route: [{destination: {host: a}}]}]"), `invalid header name "x a"`},
		{"jwt claim only on gateways", vs("hosts: [r]\nhttp: [{match: [{headers: {'@request.auth.claims.group': {exact: b}}}], route: [{destination: {host: a}}]}]"), "JWT claim based routing is only supported on gateways"},
		{"timeout ok", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], timeout: 1.5s}]"), ""},
		{"timeout zero", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], timeout: 0s}]"), "spec.http[0].timeout: must be at least 1ms, not 0s"},
		{"timeout negative", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], timeout: -1s}]"), "spec.http[0].timeout: must be at least 1ms, not -1s"},
		{"timeout sub-ms", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], timeout: 1500us}]"), "must be a whole number of milliseconds"},
		{"retries ok", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: 2, perTryTimeout: 1s, retryOn: '5xx,429'}}]"), ""},
		{"retries negative", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: -1}}]"), "spec.http[0].retries.attempts: must not be negative"},
		{"retries disabled but configured", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: 0, retryOn: 5xx}}]"), "retries are disabled"},
		{"retryOn unknown", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: 1, retryOn: 'sometimes'}}]"), `"sometimes" is not a retry condition`},
		{"fault ok", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], fault: {abort: {httpStatus: 503, percentage: {value: 50}}}}]"), ""},
		{"fault percentage", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], fault: {abort: {httpStatus: 503, percentage: {value: 150}}}}]"), "fault.abort.percentage.value: percentage must be 0 or between 0.0001 and 100, not 150"},
		{"fault status", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], fault: {abort: {httpStatus: 700}}}]"), "fault.abort.httpStatus: must be an HTTP status between 200 and 599"},
		{"fault delay needs duration", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], fault: {delay: {percentage: {value: 5}}}}]"), "fault.delay.fixedDelay: required"},
		{"fault empty", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], fault: {}}]"), "spec.http[0].fault: needs an abort, a delay or both"},
		{"redirect ok", vs("hosts: [r]\nhttp: [{redirect: {uri: /new, redirectCode: 308}}]"), ""},
		{"redirect and route", vs("hosts: [r]\nhttp: [{redirect: {uri: /new}, route: [{destination: {host: a}}]}]"), "spec.http[0].redirect: cannot be combined with route destinations"},
		{"redirect code", vs("hosts: [r]\nhttp: [{redirect: {uri: /new, redirectCode: 200}}]"), "redirect.redirectCode: must be a 3xx status, not 200"},
		{"redirect empty", vs("hosts: [r]\nhttp: [{redirect: {redirectCode: 301}}]"), "spec.http[0].redirect: must set at least one of"},
		{"direct response ok", vs("hosts: [r]\nhttp: [{directResponse: {status: 503, body: {string: down}}}]"), ""},
		{"direct response and route", vs("hosts: [r]\nhttp: [{directResponse: {status: 503}, route: [{destination: {host: a}}]}]"), "spec.http[0].directResponse: cannot be combined with route destinations"},
		{"direct response status", vs("hosts: [r]\nhttp: [{directResponse: {status: 99}}]"), "directResponse.status: must be an HTTP status"},
		{"redirect and direct response", vs("hosts: [r]\nhttp: [{redirect: {uri: /a}, directResponse: {status: 200}}]"), "redirect: cannot be combined with directResponse"},
		{"rewrite with redirect", vs("hosts: [r]\nhttp: [{redirect: {uri: /a}, rewrite: {uri: /b}}]"), "redirect: cannot be combined with rewrite"},
		{"delegate root ok", vs("hosts: [r]\nhttp: [{match: [{uri: {prefix: /a}}], delegate: {name: sub, namespace: ns}}]"), ""},
		{"delegate root with route", vs("hosts: [r]\nhttp: [{delegate: {name: sub}, route: [{destination: {host: a}}]}]"), "spec.http[0].route: a route with delegate cannot also have route destinations"},
		{"delegate name required", vs("hosts: [r]\nhttp: [{delegate: {namespace: ns}}]"), "spec.http[0].delegate.name: required"},
		{"delegate VS ok", vs("http: [{route: [{destination: {host: a}}]}]"), ""},
		{"delegate VS gateways", vs("gateways: [gw]\nhttp: [{route: [{destination: {host: a}}]}]"), "spec.gateways: a delegate VirtualService (one without hosts) cannot have gateways"},
		{"delegate VS tcp", vs("tcp: [{route: [{destination: {host: a}}]}]"), "spec.tcp: a delegate VirtualService (one without hosts) cannot have tcp routes"},
		{"delegate VS delegates", vs("http: [{delegate: {name: x}}]"), "spec.http[0].delegate: a delegate VirtualService cannot delegate again"},
		{"mirror and mirrors", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], mirror: {host: m}, mirrors: [{destination: {host: n}}]}]"), "cannot set both mirror and mirrors"},
		{"mirror percentage", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], mirror: {host: m}, mirrorPercentage: {value: 101}}]"), "mirrorPercentage.value: percentage must be between 0 and 100"},
		{"cors ok", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], corsPolicy: {allowOrigins: [{exact: 'https://a.com'}], allowMethods: [GET], maxAge: 24h}}]"), ""},
		{"cors method", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], corsPolicy: {allowMethods: [FETCH]}}]"), `corsPolicy.allowMethods[0]: "FETCH" is not an HTTP method`},
		{"header ops host", vs("hosts: [r]\nhttp: [{route: [{destination: {host: a}}], headers: {request: {remove: [Host]}}}]"), `headers.request.remove[0]: invalid header "Host"`},
		{"tcp ok", vs("hosts: [r]\ntcp: [{match: [{port: 3306}], route: [{destination: {host: db, port: {number: 3306}}}]}]"), ""},
		{"tcp route required", vs("hosts: [r]\ntcp: [{match: [{port: 3306}]}]"), "spec.tcp[0].route: at least one route destination is required"},
		{"tcp subnet", vs("hosts: [r]\ntcp: [{match: [{destinationSubnets: [10.0.0.0/33]}], route: [{destination: {host: db}}]}]"), `"10.0.0.0/33" is not a valid CIDR block`},
		{"tls ok", vs("hosts: ['*.example.com']\ntls: [{match: [{sniHosts: [a.example.com], port: 443}], route: [{destination: {host: a}}]}]"), ""},
		{"tls sni not covered", vs("hosts: [a.example.com]\ntls: [{match: [{sniHosts: [b.example.com]}], route: [{destination: {host: a}}]}]"), `SNI host "b.example.com" is not covered`},
		{"tls needs sni", vs("hosts: [a.example.com]\ntls: [{match: [{port: 443}], route: [{destination: {host: a}}]}]"), "spec.tls[0].match[0].sniHosts: at least one SNI host is required"},
		{"exportTo ok", vs("hosts: [r]\nexportTo: [., istio-system]\n" + route), ""},
		{"exportTo * with others", vs("hosts: [r]\nexportTo: ['*', ns]\n" + route), "spec.exportTo: cannot combine public (*) with other entries"},
		{"exportTo duplicate", vs("hosts: [r]\nexportTo: [., default]\n" + route), `spec.exportTo[1]: duplicate entry "default"`},
		{"exportTo ~", vs("hosts: [r]\nexportTo: ['~']\n" + route), `"~" is only allowed in a ServiceEntry`},
	})
}

func TestValidateDestinationRule(t *testing.T) {
	dr := func(spec string) string { return doc("DestinationRule", "dr", spec) }
	runRules(t, []ruleCase{
		{"minimal", dr("host: reviews"), ""},
		{"host required", dr("subsets: [{name: v1}]"), "spec.host: required"},
		{"host invalid", dr("host: 'a..b'"), `spec.host: invalid host "a..b"`},
		{"subset name required", dr("host: r\nsubsets: [{labels: {v: '1'}}]"), "spec.subsets[0].name: required"},
		{"subset name invalid", dr("host: r\nsubsets: [{name: v.1}]"), `spec.subsets[0].name: invalid subset name "v.1"`},
		{"subset names unique", dr("host: r\nsubsets: [{name: v1}, {name: v1}]"), `spec.subsets[1].name: duplicate subset name "v1" (also subsets[0])`},
		{"subset labels", dr("host: r\nsubsets: [{name: v1, labels: {'a b': c}}]"), `spec.subsets[0].labels[a b]: invalid label key`},
		{"empty traffic policy", dr("host: r\ntrafficPolicy: {}"), "spec.trafficPolicy: must set at least one field"},
		{"consistent hash ok", dr("host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user, ringHash: {minimumRingSize: 1024}}}}"), ""},
		{"cookie name", dr("host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {ttl: 10s}}}}"), "consistentHash.httpCookie.name: required"},
		{"maglev prime", dr("host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true, maglev: {tableSize: 1000}}}}"), "maglev.tableSize: must be a prime number, not 1000"},
		{"locality distribute", dr("host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: us-east/*, to: {us-east/*: 80, us-west/*: 10}}]}}}"), "distribute[0].to: weights must add up to 100, not 90"},
		{"locality failover", dr("host: r\ntrafficPolicy: {outlierDetection: {interval: 1s}, loadBalancer: {localityLbSetting: {failover: [{from: us-east, to: us-east}]}}}"), "failover[0]: from and to must be different regions"},
		{"connection pool ok", dr("host: r\ntrafficPolicy: {connectionPool: {tcp: {maxConnections: 10, connectTimeout: 100ms, idleTimeout: 0s}, http: {maxRetries: 3}}}"), ""},
		{"connection pool negative", dr("host: r\ntrafficPolicy: {connectionPool: {http: {http1MaxPendingRequests: -1}}}"), "connectionPool.http.http1MaxPendingRequests: must not be negative, not -1"},
		{"connect timeout", dr("host: r\ntrafficPolicy: {connectionPool: {tcp: {connectTimeout: 0s}}}"), "connectionPool.tcp.connectTimeout: must be at least 1ms, not 0s"},
		{"connection pool empty", dr("host: r\ntrafficPolicy: {connectionPool: {}}"), "trafficPolicy.connectionPool: must set tcp, http or both"},
		{"outlier percent", dr("host: r\ntrafficPolicy: {outlierDetection: {maxEjectionPercent: 120}}"), "outlierDetection.maxEjectionPercent: percentage must be between 0 and 100, not 120"},
		{"outlier interval", dr("host: r\ntrafficPolicy: {outlierDetection: {interval: 0s}}"), "outlierDetection.interval: must be at least 1ms"},
		{"outlier local origin", dr("host: r\ntrafficPolicy: {outlierDetection: {consecutiveLocalOriginFailures: 5}}"), "needs splitExternalLocalOriginErrors: true"},
		{"mutual tls with certs", dr("host: r\ntrafficPolicy: {tls: {mode: MUTUAL, clientCertificate: /c.pem, privateKey: /k.pem}}"), ""},
		{"mutual tls with credential", dr("host: r\ntrafficPolicy: {tls: {mode: MUTUAL, credentialName: client-cert}}"), ""},
		{"mutual tls without certs", dr("host: r\ntrafficPolicy: {tls: {mode: MUTUAL, privateKey: /k.pem}}"), "trafficPolicy.tls.clientCertificate: required for MUTUAL mode (or set credentialName)"},
		{"credential and certs", dr("host: r\ntrafficPolicy: {tls: {mode: SIMPLE, credentialName: c, caCertificates: /ca.pem}}"), "tls.credentialName: cannot be combined with clientCertificate"},
		{"port level ok", dr("host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}, loadBalancer: {simple: RANDOM}}]}"), ""},
		{"port level port required", dr("host: r\ntrafficPolicy: {portLevelSettings: [{loadBalancer: {simple: RANDOM}}]}"), "spec.trafficPolicy.portLevelSettings[0].port: required"},
		{"port level port range", dr("host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 0}, loadBalancer: {simple: RANDOM}}]}"), "portLevelSettings[0].port.number: port number must be between 1 and 65535, not 0"},
		{"port level empty", dr("host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}}]}"), "portLevelSettings[0]: must set at least one of"},
		{"workload selector exportTo", dr("host: r\nworkloadSelector: {matchLabels: {app: a}}\nexportTo: ['*']"), "a DestinationRule with a workloadSelector can only be exported to its own namespace"},
		{"workload selector wildcard", dr("host: r\nworkloadSelector: {matchLabels: {app: '*'}}"), "wildcard is not supported in a selector"},
	})
}

func TestValidateServiceEntry(t *testing.T) {
	se := func(spec string) string { return doc("ServiceEntry", "se", spec) }
	runRules(t, []ruleCase{
		{"dns ok", se("hosts: [api.example.com]\nports: [{number: 443, name: https, protocol: TLS}]\nresolution: DNS"), ""},
		{"hosts required", se("ports: [{number: 80, name: http}]"), "spec.hosts: at least one host is required"},
		{"host *", se("hosts: ['*']"), `spec.hosts[0]: invalid host "*"`},
		{"host invalid", se("hosts: ['-a.com']"), `spec.hosts[0]: invalid host "-a.com"`},
		{"no ports ok", se("hosts: [a.com]\nresolution: NONE"), ""},
		{"port number duplicate", se("hosts: [a.com]\nports: [{number: 80, name: a}, {number: 80, name: b}]"), "spec.ports[1].number: duplicate port number 80"},
		{"port name duplicate", se("hosts: [a.com]\nports: [{number: 80, name: a}, {number: 81, name: a}]"), `spec.ports[1].name: duplicate port name "a"`},
		{"port name required", se("hosts: [a.com]\nports: [{number: 80}]"), `spec.ports[0].name: invalid port name ""`},
		{"port range", se("hosts: [a.com]\nports: [{number: 0, name: a}]"), "spec.ports[0].number: port number must be between 1 and 65535, not 0"},
		{"protocol", se("hosts: [a.com]\nports: [{number: 80, name: a, protocol: HTTP3}]"), `spec.ports[0].protocol: unsupported protocol "HTTP3"`},
		{"static ok", se("hosts: [a.internal]\nports: [{number: 80, name: http}]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, ports: {http: 8080}}]"), ""},
		{"static selector ok", se("hosts: [a.internal]\nports: [{number: 80, name: http}]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}"), ""},
		{"static needs IPs", se("hosts: [a.internal]\nports: [{number: 80, name: http}]\nresolution: STATIC\nendpoints: [{address: vm.internal}]"), `spec.endpoints[0].address: "vm.internal" is not an IP address`},
		{"endpoint port undeclared", se("hosts: [a.internal]\nports: [{number: 80, name: http}]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, ports: {grpc: 9000}}]"), `spec.endpoints[0].ports[grpc]: port "grpc" is not one of the ServiceEntry's ports`},
		{"endpoint address required", se("hosts: [a.internal]\nports: [{number: 80, name: http}]\nresolution: STATIC\nendpoints: [{labels: {a: b}}]"), "spec.endpoints[0].address: required (unless network is set)"},
		{"selector and endpoints", se("hosts: [a.internal]\nports: [{number: 80, name: http}]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}\nendpoints: [{address: 10.0.0.1}]"), "spec.endpoints: cannot be set together with workloadSelector"},
		{"none with endpoints", se("hosts: [a.internal]\nports: [{number: 80, name: http}]\nresolution: NONE\nendpoints: [{address: 10.0.0.1}]"), "spec.endpoints: must be empty when resolution is NONE"},
		{"dns wildcard without endpoints", se("hosts: ['*.a.com']\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS"), "with resolution DNS and no endpoints, hosts must be resolvable names"},
		{"dns round robin", se("hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: a1.com}, {address: a2.com}]"), "resolution DNS_ROUND_ROBIN allows at most one endpoint, not 2"},
		{"cidr with dns", se("hosts: [a.com]\naddresses: [10.0.0.0/24]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS"), "CIDR blocks are allowed only with resolution NONE or STATIC"},
		{"address invalid", se("hosts: [a.com]\naddresses: [10.0.0.300]"), `spec.addresses[0]: "10.0.0.300" is not a valid IP address`},
		{"several hosts TCP", se("hosts: [a.com, b.com]\nports: [{number: 3306, name: tcp, protocol: TCP}]\nresolution: DNS"), "a ServiceEntry with several hosts needs HTTP or TLS ports unless resolution is NONE"},
		{"several hosts HTTP", se("hosts: [a.com, b.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS"), ""},
		{"exportTo ~", se("hosts: [a.com]\nexportTo: ['~']"), ""},
		{"exportTo ~ and more", se("hosts: [a.com]\nexportTo: ['~', ns]"), "cannot export to no one (~) and to someone"},
	})
}

func TestValidateWorkloadEntry(t *testing.T) {
	we := func(spec string) string { return doc("WorkloadEntry", "we", spec) }
	runRules(t, []ruleCase{
		{"ip", we("address: 10.0.0.1\nports: {http: 8080}\nlabels: {app: a}"), ""},
		{"hostname", we("address: vm-1.example.com"), ""},
		{"unix", we("address: unix:///var/run/app.sock"), ""},
		{"network only", we("network: vpc-2"), ""},
		{"address required", we("labels: {app: a}"), "spec.address: required (unless network is set)"},
		{"address invalid", we("address: 'not an address'"), `spec.address: "not an address" is neither an IP address nor a host name`},
		{"unix with ports", we("address: unix:///var/run/app.sock\nports: {http: 80}"), "spec.ports: a unix socket address cannot have ports"},
		{"unix relative", we("address: unix://app.sock"), `unix socket "app.sock" is not an absolute path`},
		{"port range", we("address: 10.0.0.1\nports: {http: 0}"), "spec.ports[http]: port number must be between 1 and 65535, not 0"},
		{"port name", we("address: 10.0.0.1\nports: {web_port: 80}"), `spec.ports[web_port]: invalid port name "web_port"`},
	})
}

func TestValidateGateway(t *testing.T) {
	gw := func(spec string) string { return doc("Gateway", "gw", spec) }
	http := "port: {number: 80, name: http, protocol: HTTP}"
	runRules(t, []ruleCase{
		{"ok", gw("servers: [{" + http + ", hosts: ['*.example.com', 'ns/a.example.com', './b.example.com']}]"), ""},
		{"servers required", gw("selector: {istio: ingressgateway}"), "spec.servers: at least one server is required"},
		{"hosts required", gw("servers: [{" + http + "}]"), "spec.servers[0].hosts: at least one host is required"},
		{"host namespace invalid", gw("servers: [{" + http + ", hosts: ['NS_1/a.com']}]"), `invalid host "NS_1/a.com": namespace "NS_1" must be`},
		{"host short name", gw("servers: [{" + http + ", hosts: ['ns/reviews']}]"), `invalid host "ns/reviews": short names are not allowed`},
		{"host partial wildcard", gw("servers: [{" + http + ", hosts: ['*a.example.com']}]"), `invalid host "*a.example.com": a wildcard must be a whole leading label`},
		{"host ip", gw("servers: [{" + http + ", hosts: ['10.1.2.3']}]"), ""},
		{"port required", gw("servers: [{hosts: ['*']}]"), "spec.servers[0].port: required"},
		{"port number", gw("servers: [{port: {number: 0, name: http, protocol: HTTP}, hosts: ['*']}]"), "spec.servers[0].port.number: port number must be between 1 and 65535"},
		{"port name", gw("servers: [{port: {number: 80, protocol: HTTP}, hosts: ['*']}]"), "spec.servers[0].port.name: required"},
		{"port protocol", gw("servers: [{port: {number: 80, name: x, protocol: QUIC}, hosts: ['*']}]"), `spec.servers[0].port.protocol: unsupported protocol "QUIC"`},
		{"port names unique", gw("servers: [{" + http + ", hosts: ['a.com']}, {" + http + ", hosts: ['b.com']}]"), `spec.servers[1].port.name: duplicate port name "http" (also servers[0])`},
		{"https needs tls", gw("servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*']}]"), "spec.servers[0].tls: required for HTTPS servers"},
		{"simple with credential", gw("servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE, credentialName: cert}}]"), ""},
		{"simple without certs", gw("servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE, privateKey: /k.pem}}]"), "spec.servers[0].tls.serverCertificate: required in SIMPLE mode (or set credentialName)"},
		{"mutual needs ca", gw("servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*'], tls: {mode: MUTUAL, serverCertificate: /c.pem, privateKey: /k.pem}}]"), "spec.servers[0].tls.caCertificates: required in MUTUAL mode"},
		{"istio mutual with certs", gw("servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*'], tls: {mode: ISTIO_MUTUAL, credentialName: c}}]"), "tls.credentialName: must not be set in ISTIO_MUTUAL mode"},
		{"https redirect on http", gw("servers: [{" + http + ", hosts: ['*'], tls: {httpsRedirect: true}}]"), ""},
		{"tls on http", gw("servers: [{" + http + ", hosts: ['*'], tls: {mode: SIMPLE, credentialName: c}}]"), "spec.servers[0].tls: a plain-text HTTP server cannot have TLS settings other than httpsRedirect"},
		{"tls on tcp", gw("servers: [{port: {number: 3306, name: tcp, protocol: TCP}, hosts: ['*'], tls: {httpsRedirect: true}}]"), "spec.servers[0].tls: a TCP server cannot have TLS settings"},
		{"bind", gw("servers: [{" + http + ", hosts: ['*'], bind: localhost}]"), `spec.servers[0].bind: "localhost" is not an IP address`},
	})
}

func TestValidateSidecar(t *testing.T) {
	sc := func(spec string) string { return doc("Sidecar", "default", spec) }
	runRules(t, []ruleCase{
		{"ok", sc("egress: [{hosts: ['./*', 'istio-system/*']}]"), ""},
		{"empty", sc("workloadSelector: {labels: {app: a}}"), "spec: empty Sidecar"},
		{"egress hosts required", sc("egress: [{port: {number: 80, protocol: HTTP, name: http}}]"), "spec.egress[0].hosts: at least one host is required"},
		{"egress host form", sc("egress: [{hosts: [reviews.default.svc.cluster.local]}]"), `spec.egress[0].hosts[0]: invalid host "reviews.default.svc.cluster.local": must be namespace/host`},
		{"egress host namespace", sc("egress: [{hosts: ['a_b/*']}]"), `invalid host "a_b/*": namespace "a_b" must be`},
		{"egress excluded namespace ok", sc("egress: [{hosts: ['~/*']}]"), ""},
		{"one catch-all egress", sc("egress: [{hosts: ['./*']}, {hosts: ['istio-system/*']}]"), "spec.egress[0]: only the last egress listener may leave out port"},
		{"egress ports unique", sc("egress: [{port: {number: 80, protocol: HTTP, name: a}, hosts: ['./*']}, {port: {number: 80, protocol: HTTP, name: b}, hosts: ['./*']}]"), "spec.egress[1].port.number: duplicate egress port 80"},
		{"ingress ok", sc("ingress: [{port: {number: 9080, protocol: HTTP, name: http}, defaultEndpoint: 127.0.0.1:8080}]"), ""},
		{"ingress port required", sc("ingress: [{defaultEndpoint: 127.0.0.1:8080}]"), "spec.ingress[0].port: required for ingress listeners"},
		{"ingress default endpoint", sc("ingress: [{port: {number: 9080, protocol: HTTP, name: http}, defaultEndpoint: 10.0.0.1:8080}]"), `spec.ingress[0].defaultEndpoint: invalid endpoint "10.0.0.1:8080": the host must be 127.0.0.1`},
		{"ingress default endpoint port", sc("ingress: [{port: {number: 9080, protocol: HTTP, name: http}, defaultEndpoint: '127.0.0.1:0'}]"), "defaultEndpoint: port number must be between 1 and 65535, not 0"},
		{"ingress unix endpoint", sc("ingress: [{port: {number: 9080, protocol: HTTP, name: http}, defaultEndpoint: 'unix:///var/run/app.sock'}]"), ""},
		{"egress proxy mode", sc("outboundTrafficPolicy: {mode: REGISTRY_ONLY, egressProxy: {host: egress.example.com, port: {number: 80}}}"), "egressProxy: can only be set with mode ALLOW_ANY"},
	})
}

func TestValidateAuthorizationPolicy(t *testing.T) {
	ap := func(spec string) string { return doc("AuthorizationPolicy", "ap", spec) }
	runRules(t, []ruleCase{
		{"allow nothing", ap(""), ""},
		{"allow ok", ap("action: ALLOW\nrules: [{from: [{source: {namespaces: [a]}}], to: [{operation: {ports: ['8080'], methods: [GET]}}]}]"), ""},
		{"deny without rules", ap("action: DENY"), "spec.rules: a DENY policy without rules never applies"},
		{"custom ok", ap("action: CUSTOM\nprovider: {name: ext-authz}\nrules: [{}]"), ""},
		{"custom needs provider", ap("action: CUSTOM\nrules: [{}]"), "spec.provider.name: required for the CUSTOM action"},
		{"provider without custom", ap("action: ALLOW\nprovider: {name: ext-authz}"), "spec.provider: only the CUSTOM action takes a provider"},
		{"custom principals", ap("action: CUSTOM\nprovider: {name: x}\nrules: [{from: [{source: {principals: [a]}}]}]"), "rules[0].from[0].source.principals: not supported with the CUSTOM action"},
		{"selector and targetRef", ap("selector: {matchLabels: {app: a}}\ntargetRef: {kind: Service, name: a}"), "spec: set only one of selector, targetRef and targetRefs"},
		{"targetRef kind", ap("targetRefs: [{kind: Deployment, name: a}]"), "spec.targetRefs[0].kind: cannot target /Deployment"},
		{"targetRef gateway ok", ap("targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: gw}"), ""},
		{"empty value", ap("rules: [{to: [{operation: {paths: ['']}}]}]"), "spec.rules[0].to[0].operation.paths[0]: must not be empty"},
		{"empty source", ap("rules: [{from: [{source: {}}]}]"), "spec.rules[0].from[0].source: must set at least one field"},
		{"ip blocks", ap("rules: [{from: [{source: {ipBlocks: [10.0.0.0/8, 1.2.3.4, 1.2.3.4/40]}}]}]"), `source.ipBlocks[2]: "1.2.3.4/40" is not a valid CIDR block`},
		{"ports", ap("rules: [{to: [{operation: {ports: ['http']}}]}]"), `operation.ports[0]: "http" is not a port number`},
		{"path template", ap("rules: [{to: [{operation: {paths: ['/a/{**}/b']}}]}]"), ""},
		{"path template after {**}", ap("rules: [{to: [{operation: {paths: ['/a/{**}/{*}']}}]}]"), "{**} must be the last template"},
		{"when key unknown", ap("rules: [{when: [{key: request.method, values: [GET]}]}]"), `spec.rules[0].when[0].key: unknown key "request.method"`},
		{"when header key", ap("rules: [{when: [{key: 'request.headers[x-token]', values: [a]}, {key: 'request.auth.claims[groups]', values: [admin]}]}]"), ""},
		{"when needs values", ap("rules: [{when: [{key: source.ip}]}]"), "spec.rules[0].when[0]: at least one of values or notValues is required"},
		{"when value format", ap("rules: [{when: [{key: destination.port, values: ['99999']}]}]"), `when[0].values[0]: "99999" is not a port number`},
		{"service accounts with principals", ap("rules: [{from: [{source: {serviceAccounts: [ns/sa], principals: [p]}}]}]"), "serviceAccounts cannot be combined with principals or namespaces"},
	})
}

func TestValidatePeerAuthentication(t *testing.T) {
	pa := func(spec string) string { return doc("PeerAuthentication", "pa", spec) }
	runRules(t, []ruleCase{
		{"mesh strict", pa("mtls: {mode: STRICT}"), ""},
		{"port level ok", pa("selector: {matchLabels: {app: a}}\nportLevelMtls: {8080: {mode: DISABLE}}"), ""},
		{"port level needs selector", pa("portLevelMtls: {8080: {mode: DISABLE}}"), "spec.portLevelMtls: needs a selector with labels"},
		{"port range", pa("selector: {matchLabels: {app: a}}\nportLevelMtls: {0: {mode: DISABLE}}"), "spec.portLevelMtls[0]: port number must be between 1 and 65535, not 0"},
		{"selector wildcard", pa("selector: {matchLabels: {app: 'a*'}}"), "wildcard is not supported in a selector"},
	})
}

func TestValidateRequestAuthentication(t *testing.T) {
	ra := func(spec string) string { return doc("RequestAuthentication", "ra", spec) }
	runRules(t, []ruleCase{
		{"ok", ra("jwtRules: [{issuer: https://idp.example.com, jwksUri: 'https://idp.example.com/jwks.json'}]"), ""},
		{"inline jwks", ra(`jwtRules: [{issuer: idp, jwks: '{"keys": []}'}]`), ""},
		{"issuer required", ra("jwtRules: [{audiences: [a]}]"), "spec.jwtRules[0].issuer: required (or set jwksUri)"},
		{"jwksUri scheme", ra("jwtRules: [{issuer: a, jwksUri: 'ftp://idp/jwks'}]"), `spec.jwtRules[0].jwksUri: URL "ftp://idp/jwks" must use http:// or https://`},
		{"jwksUri host", ra("jwtRules: [{issuer: a, jwksUri: 'https:///jwks'}]"), "has no host"},
		{"jwks and jwksUri", ra(`jwtRules: [{issuer: a, jwksUri: 'https://idp/jwks', jwks: '{"keys": []}'}]`), "spec.jwtRules[0].jwks: set jwks or jwksUri, not both"},
		{"jwks not json", ra("jwtRules: [{issuer: a, jwks: 'not json'}]"), "spec.jwtRules[0].jwks: is not a valid JSON Web Key Set"},
		{"from header name", ra("jwtRules: [{issuer: a, fromHeaders: [{prefix: 'Bearer '}]}]"), "spec.jwtRules[0].fromHeaders[0].name: required"},
		{"claim header", ra("jwtRules: [{issuer: a, outputClaimToHeaders: [{header: 'x jwt', claim: sub}]}]"), `outputClaimToHeaders[0].header: invalid header name "x jwt"`},
		{"selector and targetRefs", ra("selector: {matchLabels: {app: a}}\ntargetRefs: [{kind: Service, name: a}]"), "spec: set only one of selector, targetRef and targetRefs"},
		{"targetRef namespace", ra("targetRef: {kind: Service, name: a, namespace: other}"), "spec.targetRef.namespace: must be empty"},
	})
}

func TestValidateService(t *testing.T) {
	svc := func(spec string) string { return doc("Service", "svc", spec) }
	runRules(t, []ruleCase{
		{"ok", svc("ports: [{port: 80, name: http, targetPort: 8080}, {port: 443, name: https, targetPort: https}]\nselector: {app: a}"), ""},
		{"headless without ports", svc("clusterIP: None\nselector: {app: a}"), ""},
		{"ports required", svc("selector: {app: a}"), "spec.ports: at least one port is required"},
		{"port range", svc("ports: [{port: 0}]"), "spec.ports[0].port: port number must be between 1 and 65535, not 0"},
		{"names required with several ports", svc("ports: [{port: 80, name: http}, {port: 81}]"), "spec.ports[1].name: required when a Service has more than one port"},
		{"names unique", svc("ports: [{port: 80, name: http}, {port: 81, name: http}]"), `spec.ports[1].name: duplicate port name "http" (also ports[0])`},
		{"ports unique", svc("ports: [{port: 80, name: a}, {port: 80, name: b}]"), "spec.ports[1].port: duplicate port 80/TCP (also ports[0])"},
		{"same port other protocol", svc("ports: [{port: 53, name: dns}, {port: 53, name: dns-udp, protocol: UDP}]"), ""},
		{"protocol", svc("ports: [{port: 80, protocol: HTTP}]"), `spec.ports[0].protocol: unsupported protocol "HTTP", want TCP, UDP or SCTP`},
		{"targetPort name", svc("ports: [{port: 80, targetPort: not_valid}]"), `spec.ports[0].targetPort: invalid port name "not_valid"`},
		{"targetPort range", svc("ports: [{port: 80, targetPort: 70000}]"), "spec.ports[0].targetPort: port number must be between 1 and 65535, not 70000"},
		{"nodePort on ClusterIP", svc("ports: [{port: 80, nodePort: 30080}]"), "spec.ports[0].nodePort: only allowed for type NodePort or LoadBalancer"},
		{"type", svc("type: Internal\nports: [{port: 80}]"), `spec.type: unsupported type "Internal"`},
		{"external name", svc("type: ExternalName\nexternalName: Not_A_Host"), `spec.externalName: invalid name "Not_A_Host"`},
		{"clusterIP", svc("clusterIP: 10.0.0.300\nports: [{port: 80}]"), `spec.clusterIP: "10.0.0.300" is not an IP address or "None"`},
		{"selector", svc("ports: [{port: 80}]\nselector: {app: 'a b'}"), `spec.selector[app]: invalid label value "a b"`},
	})
}

func TestValidateEndpointSlice(t *testing.T) {
	es := func(body string) string { return doc("EndpointSlice", "es", body) }
	runRules(t, []ruleCase{
		{"ok", es("addressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]\nports: [{name: http, port: 80, protocol: TCP}]"), ""},
		{"ipv6", es("addressType: IPv6\nendpoints: [{addresses: ['fd00::1']}]"), ""},
		{"fqdn", es("addressType: FQDN\nendpoints: [{addresses: [a.example.com]}]"), ""},
		{"service-name label", strings.Replace(es("addressType: IPv4"), "  labels: {kubernetes.io/service-name: svc}\n", "", 1), `metadata.labels: label "kubernetes.io/service-name" is required`},
		{"addressType required", es("endpoints: [{addresses: [10.0.0.1]}]"), "addressType: required: IPv4, IPv6 or FQDN"},
		{"addressType", es("addressType: IPv5"), `addressType: unsupported value "IPv5"`},
		{"address for type", es("addressType: IPv4\nendpoints: [{addresses: ['fd00::1']}]"), `endpoints[0].addresses[0]: "fd00::1" is not an IPv4 address (addressType IPv4)`},
		{"addresses required", es("addressType: IPv4\nendpoints: [{addresses: []}]"), "endpoints[0].addresses: at least one address is required"},
		{"port range", es("addressType: IPv4\nports: [{name: http, port: 0}]"), "ports[0].port: port number must be between 1 and 65535, not 0"},
		{"port names unique", es("addressType: IPv4\nports: [{name: http, port: 80}, {name: http, port: 81}]"), `ports[1].name: duplicate port name "http"`},
	})
}

func TestValidatePod(t *testing.T) {
	pod := func(body string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n" + body
	}
	runRules(t, []ruleCase{
		{"ok", pod("spec: {containers: [{name: c, ports: [{containerPort: 8080, name: http}]}]}\nstatus: {podIP: 10.0.0.1, podIPs: [{ip: 10.0.0.1}, {ip: 'fd00::1'}]}"), ""},
		{"no status", pod(""), ""},
		{"podIP", pod("status: {podIP: 10.0.0}"), `status.podIP: "10.0.0" is not an IP address`},
		{"podIPs", pod("status: {podIPs: [{ip: x}]}"), `status.podIPs[0].ip: "x" is not an IP address`},
		{"container port", pod("spec: {containers: [{name: c, ports: [{containerPort: 0}]}]}"), "spec.containers[0].ports[0].containerPort: port number must be between 1 and 65535, not 0"},
		{"container port name", pod("spec: {containers: [{name: c, ports: [{containerPort: 80, name: http_port}]}]}"), `spec.containers[0].ports[0].name: invalid port name "http_port"`},
	})
}

// TestValidateFieldLines: errors point at the line of the field itself.
func TestValidateFieldLines(t *testing.T) {
	in := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts:
  - reviews
  http:
  - route:
    - destination:
        host: reviews
      weight: 0
    - destination:
        host: reviews
        subset: v_2
      weight: -5
    timeout: 0s
  - route:
    - destination: {port: {number: 9080}}
`
	errs := validate(t, in)
	want := `v.yaml:15: VirtualService default/reviews: spec.http[0].route[1].destination.subset: invalid subset name "v_2": must be a DNS-1123 label
v.yaml:16: VirtualService default/reviews: spec.http[0].route[1].weight: must not be negative, not -5
v.yaml:17: VirtualService default/reviews: spec.http[0].timeout: must be at least 1ms, not 0s
v.yaml:19: VirtualService default/reviews: spec.http[1].route[0].destination.host: required
`
	if got := errStrings(errs); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestValidateHandBuilt: objects that did not come from Decode (no source
// text, odd specs) are validated without panicking, at the document line.
func TestValidateHandBuilt(t *testing.T) {
	tests := []struct {
		name string
		obj  ingest.Object
		want string
	}{
		{"nil spec", ingest.Object{Kind: ingest.KindVirtualService, Pos: ingest.Position{File: "x", Line: 3}},
			"x:3: VirtualService: metadata.name: required\nx:3: VirtualService: spec of type <nil> is not a VirtualService (want *v1alpha3.VirtualService)\n"},
		{"typed nil", ingest.Object{Kind: ingest.KindService, Spec: (*corev1.Service)(nil)},
			"Service: metadata.name: required\nService: spec is nil\n"},
		{"wrong type", ingest.Object{Kind: ingest.KindGateway, Spec: &networking.Sidecar{}},
			"Gateway: metadata.name: required\nGateway: spec of type *v1alpha3.Sidecar is not a Gateway (want *v1alpha3.Gateway)\n"},
		{"unknown kind", ingest.Object{}, "unknown kind 0\n"},
		{"nil elements", ingest.Object{Kind: ingest.KindVirtualService, Spec: &networking.VirtualService{
			Hosts: []string{"a"}, Http: []*networking.HTTPRoute{nil, {Route: []*networking.HTTPRouteDestination{nil}}}}},
			"VirtualService: metadata.name: required\nVirtualService: spec.http[0]: must not be null\nVirtualService: spec.http[1].route[0]: must not be null\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errStrings(ingest.Validate(&tt.obj)); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
	if errs := ingest.Validate(nil); errs != nil {
		t.Errorf("Validate(nil) = %v", errs)
	}
}
