package store

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// testCA is a CA that issues certificates for 127.0.0.1, good for servers and clients.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return testCA{cert: cert, key: key, pool: pool}
}

// configs returns mutual-TLS server and client configurations with a certificate of ca that
// trust the CA trust.
func (ca testCA) configs(t *testing.T, trust testCA) RaftSecurity {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return RaftSecurity{
		ServerTLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: trust.pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		ClientTLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: trust.pool, MinVersion: tls.VersionTLS12},
	}
}

func newTestStream(t *testing.T, id string, sec RaftSecurity) *raftStream {
	t.Helper()
	s, err := newRaftStream("127.0.0.1:0", "", id, sec, 2*time.Second, zerolog.Nop())
	if err != nil {
		t.Fatalf("newRaftStream(%s): %v", id, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// accepted returns the next connection the listener hands to raft, or nil if none comes
// within wait.
func accepted(s *raftStream, wait time.Duration) net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := s.Accept()
		if err != nil {
			c = nil
		}
		got <- c
	}()
	select {
	case c := <-got:
		return c
	case <-time.After(wait):
		_ = s.Close() // ends the Accept above
		return nil
	}
}

// TestRaftStream dials a listening stream layer with another one and checks that the
// connection reaches raft exactly when both sides share the secret or trust each other's CA,
// and that bytes then flow both ways.
func TestRaftStream(t *testing.T) {
	caA, caB := newTestCA(t, "A"), newTestCA(t, "B")
	secret := []byte("0123456789abcdef-the-secret")
	other := []byte("0123456789abcdef-another-one")
	withSecret := func(s RaftSecurity, secret []byte) RaftSecurity { s.Secret = secret; return s }
	for _, tc := range []struct {
		name             string
		listener, dialer RaftSecurity
		ok               bool
	}{
		{"right secret", RaftSecurity{Secret: secret}, RaftSecurity{Secret: secret}, true},
		{"wrong secret", RaftSecurity{Secret: secret}, RaftSecurity{Secret: other}, false},
		{"no secret dials a secret listener", RaftSecurity{Secret: secret}, RaftSecurity{}, false},
		{"mTLS same CA", caA.configs(t, caA), caA.configs(t, caA), true},
		{"mTLS dialer certificate from another CA", caA.configs(t, caA), caB.configs(t, caA), false},
		{"mTLS listener certificate from another CA", caB.configs(t, caA), caA.configs(t, caA), false},
		{"mTLS same CA, right secret", withSecret(caA.configs(t, caA), secret), withSecret(caA.configs(t, caA), secret), true},
		{"mTLS same CA, wrong secret", withSecret(caA.configs(t, caA), secret), withSecret(caA.configs(t, caA), other), false},
		{"secret dials mTLS", caA.configs(t, caA), RaftSecurity{Secret: secret}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestStream(t, "listener", tc.listener)
			d := newTestStream(t, "dialer", tc.dialer)
			conn, dialErr := d.Dial(raft.ServerAddress(l.Addr().String()), 2*time.Minute)
			wait := 2 * time.Minute // bounds a hang only
			if !tc.ok {
				// The verdict comes within a round trip of the dialer's; a slow machine can only
				// make this wait pass a wrong listener by, never fail a right one.
				wait = time.Second
			}
			in := accepted(l, wait)
			if !tc.ok {
				if in != nil {
					t.Fatal("the listener handed an unauthenticated connection to raft")
				}
				if dialErr == nil {
					// The dialer may finish its side first (TLS 1.3); it must not get through.
					_ = conn.SetDeadline(time.Now().Add(time.Second))
					if _, err := conn.Write([]byte("x")); err == nil {
						if _, err := conn.Read(make([]byte, 1)); err == nil {
							t.Fatal("the dialer reached a listener that should have rejected it")
						}
					}
					_ = conn.Close()
				}
				return
			}
			if dialErr != nil {
				t.Fatalf("Dial: %v", dialErr)
			}
			defer conn.Close()
			if in == nil {
				t.Fatal("the listener accepted no connection")
			}
			defer in.Close()
			if _, err := conn.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("listener read %q, %v", buf, err)
			}
			if _, err := in.Write([]byte("pong")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "pong" {
				t.Fatalf("dialer read %q, %v", buf, err)
			}
		})
	}
}

// TestRaftStreamPlainPeer: a peer speaking plain raft (hashicorp/raft's TCP transport) to a
// secured listener never gets a connection handed to raft, and the listener still serves
// an authenticated dialer afterwards.
func TestRaftStreamPlainPeer(t *testing.T) {
	sec := RaftSecurity{Secret: []byte("0123456789abcdef-the-secret")}
	l := newTestStream(t, "listener", sec)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first bytes of an AppendEntries RPC: its type, then msgpack.
	if _, err := c.Write([]byte{0, 0x8a, 0xa4, 'T', 'e', 'r', 'm', 0x07}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := c.Read(make([]byte, 64)); !errors.Is(err, io.EOF) && n > 0 {
		// A TLS alert is fine; raft bytes are not possible since nothing was handed over.
		t.Logf("plain peer read %d bytes (TLS alert), err %v", n, err)
	}
	d := newTestStream(t, "dialer", sec)
	conn, err := d.Dial(raft.ServerAddress(l.Addr().String()), 2*time.Minute)
	if err != nil {
		t.Fatalf("Dial after a rejected plain peer: %v", err)
	}
	defer conn.Close()
	// The first connection raft gets must be the authenticated dialer's, not the plain peer's
	// (which connected first): by its address, and by the bytes the dialer sends.
	in := accepted(l, 2*time.Minute)
	if in == nil {
		t.Fatal("the authenticated dialer was not accepted")
	}
	defer in.Close()
	if got, plain := in.RemoteAddr().String(), c.LocalAddr().String(); got == plain {
		t.Fatalf("the listener handed the plain peer's connection (%s) to raft", got)
	}
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("raft's connection read %q, %v; want the dialer's ping", buf, err)
	}
}

func TestRaftSecurityValidate(t *testing.T) {
	ca := newTestCA(t, "A")
	oneWay := ca.configs(t, ca)
	oneWay.ServerTLS.ClientAuth = tls.NoClientCert
	for _, tc := range []struct {
		name string
		sec  RaftSecurity
		ok   bool
	}{
		{"none", RaftSecurity{}, true},
		{"secret", RaftSecurity{Secret: make([]byte, 16)}, true},
		{"short secret", RaftSecurity{Secret: make([]byte, 15)}, false},
		{"mTLS", ca.configs(t, ca), true},
		{"server TLS without client certificates", oneWay, false},
		{"client TLS only", RaftSecurity{ClientTLS: &tls.Config{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sec.validate()
			if (err == nil) != tc.ok {
				t.Fatalf("validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
