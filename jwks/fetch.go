package jwks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// newClient is the HTTP client of every fetch: istiod's (no keep-alives, the
// environment's proxy, TLS 1.2 or later), with roots, blocked addresses and
// redirects bounded.
func newClient(o *Options) *http.Client {
	dialer := &net.Dialer{Timeout: o.MaxTimeout}
	if len(o.BlockedCIDRs) > 0 {
		blocked := o.BlockedCIDRs
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("%w: cannot parse dialed address %q", ErrBlocked, address)
			}
			ip = ip.Unmap()
			for _, p := range blocked {
				if p.Contains(ip) {
					return fmt.Errorf("%w: %s is in %s", ErrBlocked, ip, p)
				}
			}
			return nil
		}
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            dialer.DialContext,
			DisableKeepAlives:      true,
			TLSHandshakeTimeout:    o.MaxTimeout,
			ResponseHeaderTimeout:  o.MaxTimeout,
			MaxResponseHeaderBytes: 64 << 10,
			TLSClientConfig: &tls.Config{
				RootCAs:            o.RootCAs,
				MinVersion:         tls.VersionTLS12,
				InsecureSkipVerify: o.InsecureSkipVerify, //nolint:gosec // the operator's choice (JWKS_RESOLVER_INSECURE_SKIP_VERIFY)
			},
		},
	}
}

// rootPool is the system pool plus the PEM certificates of extraFile (""
// or a missing file adds nothing, as istiod's /cacerts/extra.pem).
func rootPool(extra []byte) *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if len(extra) > 0 {
		pool.AppendCertsFromPEM(extra)
	}
	return pool
}

// get fetches uri within timeout and returns its body, at most max bytes.
func (r *Resolver) get(ctx context.Context, uri string, timeout time.Duration) (body []byte, err error) {
	defer func() { r.opts.Metrics.Fetched(err == nil) }()
	if err := checkURI(uri); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	max := r.opts.MaxBytes
	if resp.ContentLength > max {
		return nil, fmt.Errorf("%w: Content-Length %d, limit %d", ErrTooLarge, resp.ContentLength, max)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 100))
		return nil, fmt.Errorf("%w: %d, %s", ErrStatus, resp.StatusCode, strconv.Quote(string(msg)))
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
	// A body whose deadline passed is not whole even when the read ended
	// cleanly: the server may have ended the stream because the request
	// was canceled.
	if err != nil || ctx.Err() != nil {
		if err == nil || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, fmt.Errorf("reading the body: %w", context.DeadlineExceeded)
		}
		return nil, err
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return body, nil
}
