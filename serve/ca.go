package serve

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "istio.io/api/security/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// CAServer is istiod's certificate service,
// istio.v1.auth.IstioCertificateService/CreateCertificate, over a
// ca.Authority. It lives in serve, not ca, because it is network surface:
// it turns gRPC metadata and the TLS peer into ca.Credentials, and the
// ca's sentinel errors into gRPC status codes (STYLE: status codes only in
// serve). Register it on both the plaintext and the TLS server: client
// certificates, and so renewals by certificate, exist only on the latter.
type CAServer struct {
	pb.UnimplementedIstioCertificateServiceServer
	a *ca.Authority
}

// NewCAServer returns the service for a.
func NewCAServer(a *ca.Authority) *CAServer { return &CAServer{a: a} }

// Register adds the service to s.
func (c *CAServer) Register(s grpc.ServiceRegistrar) {
	pb.RegisterIstioCertificateServiceServer(s, c)
}

// maxValidity caps validity_duration before it is turned into a
// time.Duration (which would overflow past ~292 years, either way); anything
// above it is refused by the Authority's maximum anyway, and a negative one
// means the default, as zero does.
const maxValidity = int64(100 * 365 * 24 * 3600)

// CreateCertificate implements pb.IstioCertificateServiceServer.
func (c *CAServer) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	secs := max(min(req.GetValidityDuration(), maxValidity), 0) // 0: the default
	chain, _, err := c.a.CreateCertificate(ctx, ca.Request{
		Credentials: credentialsFrom(ctx),
		CSRPEM:      []byte(req.GetCsr()),
		TTL:         time.Duration(secs) * time.Second,
	})
	if err != nil {
		return nil, caStatus(err)
	}
	return &pb.IstioCertificateResponse{CertChain: chain}, nil
}

// credentialsFrom extracts what the caller presented: the first bearer
// token of the authorization metadata, and the TLS peer's certificates.
func credentialsFrom(ctx context.Context) ca.Credentials {
	var cr ca.Credentials
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if tok, ok := strings.CutPrefix(v, "Bearer "); ok && tok != "" {
				cr.BearerToken = tok
				break
			}
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			cr.PeerCertificates = ti.State.PeerCertificates
		}
	}
	return cr
}

// caStatus maps the ca's sentinel errors to gRPC codes. The message is the
// error's own: it says why (which authenticator refused, which SAN was not
// allowed) without echoing the token or the CSR.
func caStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, ca.ErrUnauthenticated):
		code = codes.Unauthenticated
	case errors.Is(err, ca.ErrIdentityMismatch):
		code = codes.PermissionDenied
	case errors.Is(err, ca.ErrInvalidCSR), errors.Is(err, ca.ErrCSRTooLarge), errors.Is(err, ca.ErrTTL):
		code = codes.InvalidArgument
	case errors.Is(err, ca.ErrNotReady):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}
