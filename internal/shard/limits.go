package shard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Limits bound what reading one source may cost, so that a source that is too large,
// malformed or stalled fails its job with a clear error instead of exhausting memory or
// hanging it. Zero fields select the defaults.
type Limits struct {
	// MaxLineBytes bounds a CSV line (default DefaultMaxLineBytes); see CSVOptions.
	MaxLineBytes int
	// MaxFields bounds the fields of a CSV row (default DefaultMaxFields).
	MaxFields int
	// DialTimeout bounds opening a TCP connection (default DefaultDialTimeout).
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS handshake (default DefaultTLSHandshakeTimeout).
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers after the request
	// was sent (default DefaultResponseHeaderTimeout).
	ResponseHeaderTimeout time.Duration
	// ReadTimeout bounds every single read from a connection: a source that sends
	// nothing for this long fails (default DefaultReadTimeout).
	ReadTimeout time.Duration
	// IdleConnTimeout is how long an idle keep-alive connection is kept (default
	// DefaultIdleConnTimeout).
	IdleConnTimeout time.Duration
}

// Default bounds of Limits.
const (
	DefaultDialTimeout           = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 30 * time.Second
	DefaultReadTimeout           = 30 * time.Second
	DefaultIdleConnTimeout       = 30 * time.Second
	maxRedirects                 = 5
)

// withDefaults returns l with its zero durations replaced by the defaults.
func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.DialTimeout, DefaultDialTimeout)
	def(&l.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	def(&l.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	def(&l.ReadTimeout, DefaultReadTimeout)
	def(&l.IdleConnTimeout, DefaultIdleConnTimeout)
	return l
}

// httpClient makes the requests of http(s) sources. Every request asks for the identity
// encoding, so byte offsets are those of the file.
type httpClient struct {
	c           *http.Client
	tr          *http.Transport
	readTimeout time.Duration
}

// newHTTPClient returns a client with r's bounds and access policy: every connection is
// dialled with the policy's address check (after DNS resolution), every redirect target
// must be allowed too, and every read of a connection has a deadline. A confined client
// ignores proxy settings, whose connections would bypass the address check.
func (r Reader) newHTTPClient() *httpClient {
	l := r.Limits.withDefaults()
	d := &net.Dialer{Timeout: l.DialTimeout, KeepAlive: 30 * time.Second, Control: r.Access.control}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &deadlineConn{Conn: c, timeout: l.ReadTimeout}, nil
		},
		TLSHandshakeTimeout:   l.TLSHandshakeTimeout,
		ResponseHeaderTimeout: l.ResponseHeaderTimeout,
		IdleConnTimeout:       l.IdleConnTimeout,
		MaxIdleConnsPerHost:   2,
		DisableCompression:    true,
	}
	if !r.Access.Confined {
		tr.Proxy = http.ProxyFromEnvironment
	}
	c := &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return r.Access.checkURL(req.URL)
	}}
	return &httpClient{c: c, tr: tr, readTimeout: l.ReadTimeout}
}

// close drops the client's idle connections.
func (hc *httpClient) close() { hc.tr.CloseIdleConnections() }

// stalled rewrites a timeout from a connection deadline into an error that says the
// source stalled; other errors pass unchanged.
func (hc *httpClient) stalled(u string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("the source %s stalled: it sent nothing for %s (the read timeout, --read-timeout) or did not answer in time; "+
			"check the server: %w", u, hc.readTimeout, err)
	}
	return err
}

// deadlineConn sets a read deadline before every read, so that a peer that stops
// sending fails the read after timeout rather than never.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}
