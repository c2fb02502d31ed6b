package serve_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/serve"
)

func TestAuthorizeCredential(t *testing.T) {
	spiffe := func(s string) *x509.Certificate {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return &x509.Certificate{URIs: []*url.URL{u}}
	}
	gw := spiffe("spiffe://cluster.local/ns/ns1/sa/gateway")
	tlsPeer := func(st tls.ConnectionState) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: st}})
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		ns   string
		want codes.Code
	}{
		{"no peer", context.Background(), "ns1", codes.Unauthenticated},
		{"plaintext", peer.NewContext(context.Background(), &peer.Peer{}), "ns1", codes.Unauthenticated},
		{"presented, not verified", tlsPeer(tls.ConnectionState{PeerCertificates: []*x509.Certificate{gw}}), "ns1", codes.Unauthenticated},
		{"verified, own namespace", tlsPeer(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{gw}}}), "ns1", codes.OK},
		{"verified, other namespace", tlsPeer(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{gw}}}), "ns2", codes.PermissionDenied},
		{"not SPIFFE", tlsPeer(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{spiffe("https://example.com/ns/ns1/sa/x")}}}), "ns1", codes.Unauthenticated},
		{"no URI", tlsPeer(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}), "ns1", codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(serve.AuthorizeCredential(tc.ctx, tc.ns)); got != tc.want {
				t.Fatalf("code %s, want %s", got, tc.want)
			}
		})
	}
	id, err := serve.PeerIdentity(tlsPeer(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{gw}}}))
	if err != nil || id.Namespace != "ns1" || id.ServiceAccount != "gateway" {
		t.Fatalf("PeerIdentity = %+v, %v", id, err)
	}
}
