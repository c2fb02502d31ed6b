package encode

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// TestGatewayFileTLSDefaults: a server with file certificates and no
// caCertificates validates clients against the mesh root (ROOTCA), and
// one without certificate files serves the workload's ("default"), as
// istiod's ApplyToCommonTLSContext falls back. Validation rejects both
// shapes (as istiod's webhook does), so only config that bypassed it
// reaches here; the xDS of the shapes validation accepts is compared with
// istiod's in istiod-gw-tls-files.txtar.
func TestGatewayFileTLSDefaults(t *testing.T) {
	for _, tc := range []struct {
		name           string
		tls            *networking.ServerTLSSettings
		cert, root     string
		requireClients bool
	}{
		{"MUTUAL without caCertificates", &networking.ServerTLSSettings{
			Mode: networking.ServerTLSSettings_MUTUAL, ServerCertificate: "/c.pem", PrivateKey: "/k.pem",
		}, "file-cert:/c.pem~/k.pem", "ROOTCA", true},
		{"OPTIONAL_MUTUAL without files", &networking.ServerTLSSettings{
			Mode: networking.ServerTLSSettings_OPTIONAL_MUTUAL,
		}, "default", "ROOTCA", false},
		{"SIMPLE with a certificate but no key", &networking.ServerTLSSettings{
			Mode: networking.ServerTLSSettings_SIMPLE, ServerCertificate: "/c.pem",
		}, "default", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &tlsv3.DownstreamTlsContext{}
			if err := gatewayTLS(tc.tls, gwALPNHTTP, &TLSDefaults{}).GetTypedConfig().UnmarshalTo(ctx); err != nil {
				t.Fatal(err)
			}
			cc := ctx.GetCommonTlsContext()
			if got := cc.GetTlsCertificateSdsSecretConfigs(); len(got) != 1 || got[0].GetName() != tc.cert {
				t.Errorf("certificates %v, want %s", got, tc.cert)
			}
			if got := cc.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName(); got != tc.root {
				t.Errorf("client validation root %q, want %q", got, tc.root)
			}
			if got := ctx.GetRequireClientCertificate().GetValue(); got != tc.requireClients {
				t.Errorf("require_client_certificate %v, want %v", got, tc.requireClients)
			}
		})
	}
}
