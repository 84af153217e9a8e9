package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMutualTLS: three coordinators, a worker and the client with TLS both ways (every party
// presents a certificate signed by the cluster's CA, and the raft traffic between the members
// runs over mutual TLS too); a client without a certificate, or speaking plain text, cannot
// connect.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeCerts(t, dir)
	tlsFlags := []string{"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key}
	c := newClusterWith(t, 3, func(c *cluster) {
		c.serveFlags, c.workerFlags, c.clientFlags = tlsFlags, tlsFlags, tlsFlags
	})
	c.startWorkers(1)
	y := yacht(t)
	out := c.mustClient(append([]string{"submit", "--wait"}, y.submitArgs()...)...)
	if !strings.Contains(out, "state       succeeded") {
		t.Fatalf("submit --wait over TLS:\n%s", out)
	}
	for _, k := range []struct {
		flags []string
		want  string
	}{{[]string{"--tls-ca", ca}, c.coords[0].apiAddr}, {nil, "it may require TLS"}} {
		c.clientFlags = k.flags
		_, errOut, err := c.client("jobs", "--leader-wait", "1s")
		if err == nil || !strings.Contains(errOut, k.want) {
			t.Errorf("jobs with %v instead of a client certificate: %v: %s", k.flags, err, errOut)
		}
		t.Logf("jobs with %v: %s", k.flags, strings.TrimSpace(errOut))
	}
}

// writeCerts writes a CA and one certificate for 127.0.0.1, good for servers and clients.
func writeCerts(t *testing.T, dir string) (caPath, certPath, keyPath string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpreduce test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gpreduce"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "EC PRIVATE KEY", keyDER)
}
