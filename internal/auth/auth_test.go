package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveHealth starts a gRPC health server on 127.0.0.1 guarded by p and returns its address.
func serveHealth(t *testing.T, p Policy, log zerolog.Logger, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, grpc.UnaryInterceptor(UnaryServerInterceptor(p, log)),
		grpc.StreamInterceptor(StreamServerInterceptor(p, log)))
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// callBoth makes a unary Check and a streaming Watch call and returns their errors.
func callBoth(t *testing.T, addr string, opts ...grpc.DialOption) (unary, stream error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := healthpb.NewHealthClient(conn)
	_, unary = c.Check(ctx, &healthpb.HealthCheckRequest{})
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	return unary, err
}

func TestInterceptors(t *testing.T) {
	logs := &syncBuffer{}
	log := zerolog.New(logs)
	policy := func(method string) []string {
		switch method {
		case checkMethod:
			return []string{"alpha", "beta"}
		case watchMethod:
			return []string{"alpha"}
		}
		return nil
	}
	addr := serveHealth(t, policy, log)
	open := serveHealth(t, Static(""), log)
	for _, tc := range []struct {
		name          string
		addr          string
		token         *string
		unary, stream codes.Code
		msg           string
	}{
		{"right token", addr, ptr("alpha"), codes.OK, codes.OK, ""},
		{"second token", addr, ptr("beta"), codes.OK, codes.Unauthenticated, "wrong token for " + watchMethod},
		{"wrong token", addr, ptr("gamma"), codes.Unauthenticated, codes.Unauthenticated, "wrong token for /grpc.health.v1.Health/"},
		{"prefix of token", addr, ptr("alph"), codes.Unauthenticated, codes.Unauthenticated, "wrong token"},
		{"empty token", addr, ptr(""), codes.Unauthenticated, codes.Unauthenticated, "missing bearer token: pass --token or set GPREDUCE_TOKEN"},
		{"no token", addr, nil, codes.Unauthenticated, codes.Unauthenticated, "missing bearer token: pass --token or set GPREDUCE_TOKEN"},
		{"open server, no token", open, nil, codes.OK, codes.OK, ""},
		{"open server, any token", open, ptr("x"), codes.OK, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			if tc.token != nil {
				opts = append(opts, grpc.WithPerRPCCredentials(PerRPC(*tc.token, false)))
			}
			u, s := callBoth(t, tc.addr, opts...)
			if status.Code(u) != tc.unary || status.Code(s) != tc.stream {
				t.Fatalf("unary %v, stream %v; want codes %v, %v", u, s, tc.unary, tc.stream)
			}
			for _, err := range []error{u, s} {
				if err != nil && !strings.Contains(status.Convert(err).Message(), tc.msg) {
					t.Errorf("error %q lacks %q", err, tc.msg)
				}
			}
		})
	}
	out := logs.String()
	for _, w := range []string{`"level":"warn"`, `"method":"` + checkMethod + `"`, `"method":"` + watchMethod + `"`, `"peer":"127.0.0.1:`, "wrong token", "missing bearer token"} {
		if !strings.Contains(out, w) {
			t.Errorf("logs lack %s:\n%s", w, out)
		}
	}
	if strings.Contains(out, "gamma") || strings.Contains(out, "alpha") {
		t.Errorf("logs leak a token:\n%s", out)
	}
}

func ptr(s string) *string { return &s }

func TestPerRPCRequiresTLS(t *testing.T) {
	addr := serveHealth(t, Static("tok"), zerolog.Nop())
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(PerRPC("tok", true)))
	if err == nil {
		defer conn.Close()
		_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	}
	if err == nil || !strings.Contains(err.Error(), "transport") {
		t.Fatalf("token sent without TLS: %v", err)
	}
	md, err := PerRPC("tok", false).GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer tok" {
		t.Fatalf("metadata %v, %v", md, err)
	}
}

// pki is a CA with a server certificate for 127.0.0.1 and localhost and a client
// certificate, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T, dir, name string) pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{ca: writePEM(t, dir, name+"-ca.pem", "CERTIFICATE", caDER)}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, dir, name+"-"+cn+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-"+cn+"-key.pem", "EC PRIVATE KEY", kb)
	}
	p.serverCert, p.serverKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return p
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLSEndToEnd(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir, "main")
	other := newPKI(t, dir, "other")
	mtls, err := ServerTLS(p.serverCert, p.serverKey, p.ca)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := ServerTLS(p.serverCert, p.serverKey, "")
	if err != nil {
		t.Fatal(err)
	}
	mtlsAddr := serveHealth(t, Static("tok"), zerolog.Nop(), grpc.Creds(credentials.NewTLS(mtls)))
	tlsAddr := serveHealth(t, Static("tok"), zerolog.Nop(), grpc.Creds(credentials.NewTLS(plain)))
	client := func(ca, cert, key string) *tls.Config {
		c, err := ClientTLS(ca, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		addr  string
		tls   *tls.Config
		token string
		ok    bool
		code  codes.Code
	}{
		{"mutual TLS and token", mtlsAddr, client(p.ca, p.clientCert, p.clientKey), "tok", true, codes.OK},
		{"mutual TLS, wrong token", mtlsAddr, client(p.ca, p.clientCert, p.clientKey), "bad", false, codes.Unauthenticated},
		{"no client certificate", mtlsAddr, client(p.ca, "", ""), "tok", false, codes.Unavailable},
		{"client certificate of another CA", mtlsAddr, client(p.ca, other.clientCert, other.clientKey), "tok", false, codes.Unavailable},
		{"server of another CA", mtlsAddr, client(other.ca, p.clientCert, p.clientKey), "tok", false, codes.Unavailable},
		{"server TLS only", tlsAddr, client(p.ca, "", ""), "tok", true, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, s := callBoth(t, tc.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc.tls)),
				grpc.WithPerRPCCredentials(PerRPC(tc.token, true)))
			if tc.ok && (u != nil || s != nil) {
				t.Fatalf("unary %v, stream %v", u, s)
			}
			if !tc.ok && (status.Code(u) != tc.code || status.Code(s) != tc.code) {
				t.Fatalf("unary %v, stream %v; want %v", u, s, tc.code)
			}
		})
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir, "x")
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"server without key", second(ServerTLS(p.serverCert, "", "")), "need both"},
		{"server missing cert", second(ServerTLS(missing, p.serverKey, "")), "missing.pem"},
		{"server junk CA", second(ServerTLS(p.serverCert, p.serverKey, junk)), "junk.pem holds no PEM certificate"},
		{"server missing CA", second(ServerTLS(p.serverCert, p.serverKey, missing)), "missing.pem"},
		{"client cert without key", second(ClientTLS(p.ca, p.clientCert, "")), "needs both"},
		{"client junk CA", second(ClientTLS(junk, "", "")), "junk.pem"},
		{"client mismatched key", second(ClientTLS(p.ca, p.clientCert, p.serverKey)), "load"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want, err string
	}{
		{"plain", "s3cret", "s3cret", ""},
		{"newline", "s3cret\n", "s3cret", ""},
		{"spaces", "  s3cret \r\n\n", "s3cret", ""},
		{"empty", "", "", "is empty"},
		{"blank", " \n\t\n", "", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadTokenFile(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("got %q, %v; want an error naming %s", got, err, path)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := ReadTokenFile(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing file: %v", err)
	}
}
