package shard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Access confines the data sources a process reads: local files under a set of root
// directories, and http(s) URLs matching an allow-list whose addresses, after DNS
// resolution, are public unless private ones are allowed. The zero Access is unconfined
// (every path and URL may be read), which suits a command run on a user's own files
// (`coordinator eval`, `predict`); coordinators and workers, which read what a job names,
// are confined (see NewAccess).
type Access struct {
	// Confined turns the checks on.
	Confined bool
	// Roots are the directories whose files may be read, absolute with symbolic links
	// resolved. A path is read only if it, with its own links resolved, lies under one of
	// them.
	Roots []string
	// URLs are the allowed http(s) sources: a prefix with a scheme
	// ("https://data.example.com/sets/", matching that scheme and host and paths under
	// that one) or a host pattern ("data.example.com", "*.example.com", "10.0.0.5:8080",
	// matching http and https). No entries: no URL may be read.
	URLs []url.URL
	// AllowPrivate allows connections to loopback, link-local, private (RFC 1918, RFC
	// 4193), shared (RFC 6598) and unspecified addresses; otherwise they are refused when
	// dialled, after DNS resolution, also on redirects.
	AllowPrivate bool
}

// NewAccess returns a confined Access. Roots are resolved to absolute paths with their
// symbolic links resolved; no roots means the working directory alone. Each of urls is a
// URL prefix with an http or https scheme, or a host pattern (see Access.URLs).
func NewAccess(roots, urls []string, allowPrivate bool) (Access, error) {
	a := Access{Confined: true, AllowPrivate: allowPrivate}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	for _, r := range roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return Access{}, fmt.Errorf("data root %s: %w", r, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return Access{}, fmt.Errorf("data root %s: %w", r, err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return Access{}, fmt.Errorf("data root %s: %w", r, err)
		}
		if !fi.IsDir() {
			return Access{}, fmt.Errorf("data root %s: not a directory", r)
		}
		a.Roots = append(a.Roots, real)
	}
	for _, p := range urls {
		u, err := parseURLPattern(p)
		if err != nil {
			return Access{}, err
		}
		a.URLs = append(a.URLs, u)
	}
	return a, nil
}

// parseURLPattern parses an allow-list entry: a URL prefix or a host pattern, which is
// returned with an empty scheme.
func parseURLPattern(p string) (url.URL, error) {
	bad := func(why string) error {
		return fmt.Errorf("allowed URL %q: %s: give a URL prefix such as https://data.example.com/sets/ or a host such as data.example.com or *.example.com", p, why)
	}
	s := strings.TrimSpace(p)
	if s == "" {
		return url.URL{}, bad("empty")
	}
	if !strings.Contains(s, "://") {
		host := strings.ToLower(s)
		if strings.ContainsAny(host, "/?#@") || strings.Contains(strings.TrimPrefix(host, "*."), "*") {
			return url.URL{}, bad("not a host name")
		}
		return url.URL{Host: host}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return url.URL{}, bad(err.Error())
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return url.URL{}, bad("the scheme must be http or https")
	}
	if u.Host == "" || u.User != nil || strings.Contains(u.Host, "*") {
		return url.URL{}, bad("a prefix needs a plain host")
	}
	u.Host = strings.ToLower(u.Host)
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	return *u, nil
}

// ErrRefused is wrapped by the errors for a source outside a confined Access.
var ErrRefused = errors.New("refused by the data access policy")

// checkPath refuses a local path outside the roots. It resolves symbolic links, so a link
// inside a root that points outside is refused too.
func (a Access) checkPath(path string) error {
	if !a.Confined {
		return nil
	}
	refuse := func() error {
		return fmt.Errorf("data source %s: %w: it is outside the data roots (%s); put the data under a root, or start "+
			"the coordinators and workers with --data-root covering it", path, ErrRefused, strings.Join(a.Roots, ", "))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return refuse()
	}
	if !a.under(abs) {
		// Checked before touching the file system, so nothing outside the roots is probed.
		return refuse()
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("data source %s: %w", path, err)
	}
	if !a.under(real) {
		return refuse()
	}
	return nil
}

func (a Access) under(p string) bool {
	for _, r := range a.Roots {
		rel, err := filepath.Rel(r, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}

// checkURL refuses a URL that matches no allow-list entry.
func (a Access) checkURL(u *url.URL) error {
	if !a.Confined {
		return nil
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	for _, p := range a.URLs {
		if p.Scheme == "" {
			if hostMatches(p.Host, host) {
				return nil
			}
			continue
		}
		if p.Scheme == scheme && p.Host == host && pathUnder(p.Path, u.Path) {
			return nil
		}
	}
	return fmt.Errorf("data source %s: %w: the URL matches no allowed prefix or host; start the coordinators and workers "+
		"with --allow-url for it", u.Redacted(), ErrRefused)
}

// hostMatches matches a host[:port] against a pattern: "h" (any port), "h:port" or "*.h"
// (subdomains of h, any port).
func hostMatches(pattern, host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	switch {
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(name, pattern[1:])
	case strings.Contains(pattern, ":") && !strings.HasPrefix(pattern, "["):
		if _, _, err := net.SplitHostPort(pattern); err == nil {
			return pattern == host
		}
	}
	return strings.Trim(pattern, "[]") == name || pattern == host
}

// pathUnder says whether path p lies under prefix, at a '/' boundary.
func pathUnder(prefix, p string) bool {
	if prefix == "" || prefix == "/" {
		return true
	}
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	return strings.HasSuffix(prefix, "/") || len(p) == len(prefix) || p[len(prefix)] == '/'
}

// control is the net.Dialer Control of confined HTTP clients: it refuses to connect to
// a non-public address unless AllowPrivate. It sees the address after DNS resolution, so
// a public name that resolves to a private address is refused too.
func (a Access) control(_, address string, _ syscall.RawConn) error {
	if !a.Confined || a.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w: not an IP address", address, ErrRefused)
	}
	if ip := ap.Addr().Unmap(); !publicAddr(ip) {
		return fmt.Errorf("dial %s: %w: a loopback, link-local or private address; allow it with --allow-private-urls", address, ErrRefused)
	}
	return nil
}

// publicAddr reports whether ip is none of loopback, private, link-local, multicast,
// unspecified or RFC 6598's carrier-grade NAT range (which IsPrivate does not cover).
func publicAddr(ip netip.Addr) bool {
	shared := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, 0, 0}), 10)
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsPrivate() && !ip.IsLinkLocalUnicast() && !ip.IsLinkLocalMulticast() &&
		!ip.IsInterfaceLocalMulticast() && !ip.IsUnspecified() && !ip.IsMulticast() && !shared.Contains(ip)
}
