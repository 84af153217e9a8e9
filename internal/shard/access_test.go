package shard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAccessPaths: a confined reader reads files under its roots only, resolving symbolic
// links; the error names the path and never what the file holds.
func TestAccessPaths(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	const body = "secret-7f3a,b\n1,2\n3,4\n"
	in := writeFileIn(t, root, "in.csv", body)
	out := writeFileIn(t, outside, "out.csv", body)
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	nested := writeFileIn(t, filepath.Join(root, "sub"), "n.csv", body)
	linkOut := filepath.Join(root, "link-out.csv")
	linkIn := filepath.Join(root, "link-in.csv")
	for _, l := range [][2]string{{out, linkOut}, {in, linkIn}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := NewAccess([]string{root}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	r := Reader{Access: acc}
	for _, tc := range []struct {
		name, uri string
		ok        bool
	}{
		{"file under the root", in, true},
		{"nested file", nested, true},
		{"file:// URL under the root", "file://" + in, true},
		{"link to a file under the root", linkIn, true},
		{"file outside", out, false},
		{"link out of the root", linkOut, false},
		{"dot-dot out of the root", filepath.Join(root, "..", filepath.Base(outside), "out.csv"), false},
		{"system file", "/etc/passwd", false},
		{"the root's parent", filepath.Dir(root), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{URI: tc.uri, Header: true, Target: "nosuch"}
			_, err := r.Plan(context.Background(), src, 2)
			if tc.ok {
				// Readable: the error is about the target column, not access.
				if err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "has 2 fields") {
					t.Fatalf("Plan: %v, want the unknown-target error", err)
				}
			} else if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "outside the data roots") {
				t.Fatalf("Plan: %v, want a refusal", err)
			}
			if err != nil && strings.Contains(err.Error(), "secret-7f3a") {
				t.Fatalf("the error quotes the file: %v", err)
			}
			_, err = r.Load(context.Background(), src, Ref{Length: 3})
			if !tc.ok && !errors.Is(err, ErrRefused) {
				t.Fatalf("Load: %v, want a refusal", err)
			}
		})
	}
	// UCI directories are checked, with their files.
	if _, err := r.Plan(context.Background(), Source{URI: outside, Format: "uci"}, 2); !errors.Is(err, ErrRefused) {
		t.Errorf("UCI directory outside the root: %v", err)
	}
	// The zero Access reads anything.
	if _, err := (Reader{}).Plan(context.Background(), Source{URI: out, Header: true}, 2); err != nil {
		t.Errorf("unconfined: %v", err)
	}
	if _, err := NewAccess([]string{in}, nil, false); err == nil {
		t.Error("a file accepted as a data root")
	}
}

// TestAccessURLPatterns: URL prefixes match their scheme, host and paths under them at a
// '/' boundary; host patterns match a host (any port), a host:port, or subdomains.
func TestAccessURLPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern, url string
		ok           bool
	}{
		{"https://data.example.com/sets/", "https://data.example.com/sets/a.csv", true},
		{"https://data.example.com/sets", "https://data.example.com/sets/a.csv", true},
		{"https://data.example.com/sets", "https://data.example.com/setsx/a.csv", false},
		{"https://data.example.com/sets/", "http://data.example.com/sets/a.csv", false},
		{"https://data.example.com", "https://data.example.com.evil.net/a.csv", false},
		{"https://data.example.com", "https://DATA.example.com/a.csv", true},
		{"https://data.example.com:8443/", "https://data.example.com/a.csv", false},
		{"data.example.com", "http://data.example.com:8080/a.csv", true},
		{"data.example.com", "https://data.example.com/a.csv", true},
		{"data.example.com", "https://x.data.example.com/a.csv", false},
		{"*.example.com", "https://x.data.example.com/a.csv", true},
		{"*.example.com", "https://example.com/a.csv", false},
		{"*.example.com", "https://badexample.com/a.csv", false},
		{"10.0.0.5:8080", "http://10.0.0.5:8080/a.csv", true},
		{"10.0.0.5:8080", "http://10.0.0.5:9090/a.csv", false},
		{"[::1]", "http://[::1]:8080/a.csv", true},
	} {
		acc, err := NewAccess([]string{t.TempDir()}, []string{tc.pattern}, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := acc.checkURL(u); (err == nil) != tc.ok {
			t.Errorf("pattern %s, URL %s: %v, want allowed %v", tc.pattern, tc.url, err, tc.ok)
		}
	}
	for _, bad := range []string{"", "ftp://x/", "https://", "https://*.x.com/", "a/b", "x.*.com", "https://u:p@x.com/"} {
		if _, err := NewAccess(nil, []string{bad}, false); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

// TestPublicAddr: loopback, private, link-local, shared and unspecified addresses are not
// public, in both families and as IPv4-mapped IPv6.
func TestPublicAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"8.8.8.8", true}, {"2001:4860:4860::8888", true}, {"93.184.216.34", true},
		{"127.0.0.1", false}, {"127.8.9.1", false}, {"::1", false}, {"10.1.2.3", false}, {"172.16.0.1", false},
		{"192.168.1.1", false}, {"169.254.169.254", false}, {"fe80::1", false}, {"fc00::1", false},
		{"100.64.0.1", false}, {"0.0.0.0", false}, {"::", false}, {"::ffff:127.0.0.1", false}, {"224.0.0.1", false},
	} {
		acc := Access{Confined: true}
		err := acc.control("tcp", netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 80).String(), nil)
		if (err == nil) != tc.public {
			t.Errorf("%s: %v, want public %v", tc.addr, err, tc.public)
		}
		acc.AllowPrivate = true
		if err := acc.control("tcp", netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 80).String(), nil); err != nil {
			t.Errorf("%s with private addresses allowed: %v", tc.addr, err)
		}
	}
}

// TestAccessHTTP: a confined reader refuses a loopback server even when its URL is allowed
// (checked after DNS resolution: "localhost" too) unless private addresses are allowed, and
// refuses a redirect to a URL outside the allow-list; the response never reaches the error.
func TestAccessHTTP(t *testing.T) {
	const body = "secret-7f3a,b\n1,2\n3,4\n"
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/d.csv", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "d.csv", time.Time{}, strings.NewReader(body))
	})
	mux.HandleFunc("/ok/redirect.csv", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/other/d.csv", http.StatusFound)
	})
	mux.HandleFunc("/other/d.csv", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "d.csv", time.Time{}, strings.NewReader(body))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, tc := range []struct {
		name, url string
		allow     []string
		private   bool
		want      string // "" for success
	}{
		{"loopback by IP", srv.URL + "/ok/d.csv", []string{srv.URL + "/ok/"}, false, "loopback, link-local or private"},
		{"loopback by name", "http://localhost:" + port + "/ok/d.csv", []string{"localhost"}, false, "loopback, link-local or private"},
		{"not on the list", srv.URL + "/other/d.csv", []string{srv.URL + "/ok/"}, true, "matches no allowed prefix"},
		{"redirect off the list", srv.URL + "/ok/redirect.csv", []string{srv.URL + "/ok/"}, true, "matches no allowed prefix"},
		{"allowed", srv.URL + "/ok/d.csv", []string{srv.URL + "/ok/"}, true, ""},
		{"redirect on the list", srv.URL + "/ok/redirect.csv", []string{srv.URL + "/"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc, err := NewAccess([]string{t.TempDir()}, tc.allow, tc.private)
			if err != nil {
				t.Fatal(err)
			}
			r := Reader{Access: acc}
			src := Source{URI: tc.url, Header: true}
			var tab *Table
			if tc.name == "redirect on the list" {
				// A redirecting server has no size to split: read the whole file as a shard.
				tab, err = r.Load(context.Background(), src, Ref{Length: 0})
			} else {
				var l Layout
				if l, err = r.Plan(context.Background(), src, 2); err == nil {
					tab, err = r.Load(context.Background(), src, l.Refs[0])
				}
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v", err)
			case tc.want == "" && tab.N() == 0 && tc.name == "redirect on the list":
				t.Fatalf("no rows read")
			case tc.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v, want a refusal mentioning %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret-7f3a") {
				t.Fatalf("the error quotes the response: %v", err)
			}
		})
	}
}

// TestHTTPStalls: a server that accepts and never answers, and one that stops sending in
// the middle of a body, fail a read within about the read timeout with an error that says
// the source stalled.
func TestHTTPStalls(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("/silent.csv", func(w http.ResponseWriter, r *http.Request) { <-ctx.Done() })
	mux.HandleFunc("/stops.csv", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "a,b\n1,2\n")
		w.(http.Flusher).Flush()
		<-ctx.Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer cancel()
	const timeout = 300 * time.Millisecond
	r := Reader{Limits: Limits{ReadTimeout: timeout}}
	for _, path := range []string{"/silent.csv", "/stops.csv"} {
		t0 := time.Now()
		_, err := r.Load(context.Background(), Source{URI: srv.URL + path, Header: true}, Ref{Length: 500})
		took := time.Since(t0)
		if err == nil || !strings.Contains(err.Error(), "stalled") {
			t.Errorf("%s: %v, want a stall", path, err)
		}
		if took > 20*timeout {
			t.Errorf("%s: failed after %s, with a read timeout of %s", path, took, timeout)
		}
	}
}
