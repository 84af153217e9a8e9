package auth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ServerTLS returns a server TLS configuration with the certificate and key in the PEM
// files certFile and keyFile. If caFile is given, clients must present a certificate
// signed by one of its CA certificates (mutual TLS).
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("server TLS: need both a certificate and a key file (got %q and %q)", certFile, keyFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server TLS: load %s and %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("server TLS: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLS returns a client TLS configuration that trusts the CA certificates in caFile
// (the system roots when caFile is empty) and, when certFile and keyFile are given,
// presents that certificate to servers that ask for one.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("client TLS: %w", err)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client TLS: load %s and %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, fmt.Errorf("client TLS: a client certificate needs both a certificate and a key file (got %q and %q)", certFile, keyFile)
	}
	return cfg, nil
}

// loadPool reads PEM CA certificates.
func loadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("read CA certificates: %s holds no PEM certificate", caFile)
	}
	return pool, nil
}
