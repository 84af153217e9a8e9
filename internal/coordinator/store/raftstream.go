package store

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// ErrInsecureRaft means an operation needs authenticated raft traffic (more than one member,
// or a raft address other members can reach) but the node has neither a raft secret nor
// mutual TLS.
var ErrInsecureRaft = errors.New("raft traffic is not authenticated: configure a raft secret or mutual TLS")

// RaftSecurity says how raft members authenticate each other. With neither field set the
// raft port speaks plain TCP, which Open allows only for a single member on loopback.
//
// With Secret alone, every connection is TLS 1.3 in both directions with one Ed25519 key
// derived from the secret (HMAC-SHA256 of the secret under a fixed label is the key's seed):
// each side pins the other's certificate to that key, so only holders of the secret complete
// the handshake, and the traffic is encrypted with ephemeral keys. Inside that channel both
// sides then run the nonce handshake below. With ServerTLS and ClientTLS (mutual TLS with the
// cluster's CA), connections use those instead; adding Secret runs the nonce handshake
// inside them too, so that a certificate from the same CA (a worker's, say) is not enough to
// speak raft.
//
// The nonce handshake: each side sends a hello (magic, version, a 32-byte random nonce, its
// server ID) at once; the dialer then sends HMAC-SHA256 under a
// key derived from the secret over the role "dialer", both nonces, both IDs and 32 bytes
// exported from the TLS session (RFC 5705/8446 §7.5, binding the proof to this channel), and
// the listener checks it before it answers with the same MAC for the role "listener". No raft
// byte is read or written before both proofs check out.
type RaftSecurity struct {
	// Secret is the cluster's raft secret, the same on every member (at least 16 bytes).
	Secret []byte
	// ServerTLS and ClientTLS, both set, wrap raft connections in mutual TLS: ServerTLS must
	// require and verify client certificates, ClientTLS must present one and trust the CA.
	// The server name checked is the host of the raft address dialled.
	ServerTLS, ClientTLS *tls.Config
}

// Enabled reports whether raft traffic is authenticated.
func (s RaftSecurity) Enabled() bool { return len(s.Secret) > 0 || s.MutualTLS() }

// MutualTLS reports whether both TLS configurations are set and the server one requires
// and verifies client certificates.
func (s RaftSecurity) MutualTLS() bool {
	return s.ServerTLS != nil && s.ClientTLS != nil && s.ServerTLS.ClientAuth == tls.RequireAndVerifyClientCert
}

// validate checks the fields for a usable configuration.
func (s RaftSecurity) validate() error {
	switch {
	case len(s.Secret) > 0 && len(s.Secret) < minRaftSecret:
		return fmt.Errorf("raft secret: %d bytes is too short: use at least %d (e.g. head -c 32 /dev/urandom | base64): %w",
			len(s.Secret), minRaftSecret, ErrInvalidArgument)
	case (s.ServerTLS != nil || s.ClientTLS != nil) && !s.MutualTLS():
		return fmt.Errorf("raft TLS: both a server configuration requiring verified client certificates and a client configuration are needed: %w",
			ErrInvalidArgument)
	}
	return nil
}

// Parameters of the raft handshake.
const (
	minRaftSecret     = 16
	raftHelloMagic    = "GPRF"
	raftHelloVersion  = 1
	raftNonceBytes    = 32
	raftMaxIDBytes    = 255
	raftHandshakes    = 64 // handshakes under way at once on the listening side
	raftExportLabel   = "EXPORTER-gpreduce-raft-v1"
	raftHMACLabel     = "gpreduce raft hmac v1"
	raftSeedLabel     = "gpreduce raft tls ed25519 v1"
	raftProofDialer   = "dialer"
	raftProofListener = "listener"
)

// raftStream is the raft.StreamLayer of a Node: a TCP listener whose connections are handed
// to raft only after the handshake of RaftSecurity, and a dialer doing the same.
type raftStream struct {
	ln        net.Listener
	advertise net.Addr
	id        string
	timeout   time.Duration // bound of one handshake
	log       zerolog.Logger

	key                  []byte      // HMAC key (nil: no nonce handshake)
	serverTLS, clientTLS *tls.Config // nil: plain TCP
	derived              bool        // the TLS configurations pin the secret's key

	conns chan net.Conn
	sem   chan struct{}
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

var _ raft.StreamLayer = (*raftStream)(nil)

// newRaftStream listens on bind and returns the stream layer; advertise (nil: the listening
// address) is the address other members dial. timeout bounds each handshake.
func newRaftStream(bind, advertise string, id string, sec RaftSecurity, timeout time.Duration, log zerolog.Logger) (*raftStream, error) {
	if err := sec.validate(); err != nil {
		return nil, err
	}
	if len(id) > raftMaxIDBytes {
		return nil, fmt.Errorf("raft stream: server ID of %d bytes: at most %d: %w", len(id), raftMaxIDBytes, ErrInvalidArgument)
	}
	s := &raftStream{id: id, timeout: timeout, log: log,
		conns: make(chan net.Conn), sem: make(chan struct{}, raftHandshakes), done: make(chan struct{})}
	switch {
	case sec.MutualTLS():
		s.serverTLS, s.clientTLS = sec.ServerTLS.Clone(), sec.ClientTLS.Clone()
	case len(sec.Secret) > 0:
		var err error
		if s.serverTLS, s.clientTLS, err = derivedTLS(sec.Secret); err != nil {
			return nil, err
		}
		s.derived = true
	}
	if len(sec.Secret) > 0 {
		s.key = LabelledKey(sec.Secret, raftHMACLabel)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	if s.advertise, err = advertisedRaftAddr(advertise, ln.Addr()); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("raft stream: %w", err)
	}
	s.wg.Go(s.acceptLoop)
	return s, nil
}

// LabelledKey returns HMAC-SHA256(secret, label): independent keys for independent uses of
// the raft secret (the raft handshake here, the membership proofs of the API).
func LabelledKey(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// derivedTLS returns TLS 1.3 configurations that present a self-signed certificate of the
// Ed25519 key whose seed is derived from secret, and accept only a peer presenting the same
// key.
func derivedTLS(secret []byte) (server, client *tls.Config, err error) {
	priv := ed25519.NewKeyFromSeed(LabelledKey(secret, raftSeedLabel))
	pub := priv.Public().(ed25519.PublicKey)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpreduce raft"},
		NotBefore: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("raft stream: certificate of the secret's key: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}
	pin := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("raft peer presented no certificate")
		}
		c, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return fmt.Errorf("raft peer certificate: %w", err)
		}
		if k, ok := c.PublicKey.(ed25519.PublicKey); !ok || !k.Equal(pub) {
			return errors.New("raft peer does not hold the cluster's raft secret")
		}
		return nil
	}
	server = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAnyClientCert, VerifyPeerCertificate: pin}
	// The chain is not verified against roots: the pin above is the whole check (the
	// handshake still verifies the peer's signature with the pinned key).
	client = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		InsecureSkipVerify: true, VerifyPeerCertificate: pin} //nolint:gosec // pinned key, see above
	return server, client, nil
}

// acceptLoop accepts connections and hands each to its own handshake, so a slow or silent
// peer holds up nobody else.
func (s *raftStream) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Error().Err(err).Msg("raft listener failed")
			s.Close()
			return
		}
		select {
		case s.sem <- struct{}{}:
		default:
			s.log.Warn().Str("peer", c.RemoteAddr().String()).Int("limit", raftHandshakes).
				Msg("raft connection refused: too many handshakes under way")
			_ = c.Close()
			continue
		}
		s.wg.Go(func() {
			defer func() { <-s.sem }()
			sc, peer, err := s.handshake(c, false, "")
			if err != nil {
				s.log.Warn().Err(err).Str("peer", c.RemoteAddr().String()).Msg("raft connection rejected")
				_ = c.Close()
				return
			}
			s.log.Debug().Str("peer", c.RemoteAddr().String()).Str("peer_id", peer).Msg("raft connection authenticated")
			select {
			case s.conns <- sc:
			case <-s.done:
				_ = sc.Close()
			}
		})
	}
}

// Accept returns the next authenticated connection.
func (s *raftStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening; connections already handed out stay open.
func (s *raftStream) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

// Addr returns the advertised address.
func (s *raftStream) Addr() net.Addr { return s.advertise }

// Dial connects to a member and runs the handshake, all within timeout.
func (s *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 || timeout > s.timeout {
		timeout = s.timeout
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(string(address))
	sc, _, err := s.handshake(c, true, host)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft handshake with %s: %w", address, err)
	}
	return sc, nil
}

// handshake secures c as the dialer (client) or the listener and returns the connection
// raft uses and the peer's server ID (if the nonce handshake ran).
func (s *raftStream) handshake(c net.Conn, client bool, host string) (net.Conn, string, error) {
	if err := c.SetDeadline(time.Now().Add(s.timeout)); err != nil {
		return nil, "", err
	}
	conn, binding := c, []byte(nil)
	if s.serverTLS != nil {
		var tc *tls.Conn
		if client {
			cfg := s.clientTLS
			if !s.derived && cfg.ServerName == "" {
				cfg = cfg.Clone()
				cfg.ServerName = host
			}
			tc = tls.Client(c, cfg)
		} else {
			tc = tls.Server(c, s.serverTLS)
		}
		if err := tc.Handshake(); err != nil {
			return nil, "", fmt.Errorf("TLS: %w", err)
		}
		st := tc.ConnectionState()
		var err error
		if binding, err = st.ExportKeyingMaterial(raftExportLabel, nil, 32); err != nil {
			return nil, "", fmt.Errorf("TLS channel binding: %w", err)
		}
		conn = tc
	}
	peer := ""
	if s.key != nil {
		var err error
		if peer, err = nonceHandshake(conn, client, s.id, s.key, binding); err != nil {
			return nil, "", err
		}
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, "", err
	}
	return conn, peer, nil
}

// hello is one side's first handshake message.
type hello struct {
	nonce [raftNonceBytes]byte
	id    string
}

func (h hello) write(w io.Writer) error {
	b := make([]byte, 0, len(raftHelloMagic)+2+raftNonceBytes+len(h.id))
	b = append(b, raftHelloMagic...)
	b = append(b, raftHelloVersion)
	b = append(b, h.nonce[:]...)
	b = append(b, byte(len(h.id)))
	b = append(b, h.id...)
	_, err := w.Write(b)
	return err
}

func readHello(r io.Reader) (hello, error) {
	var h hello
	head := make([]byte, len(raftHelloMagic)+1+raftNonceBytes+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return h, fmt.Errorf("read hello: %w", err)
	}
	if string(head[:len(raftHelloMagic)]) != raftHelloMagic {
		return h, errors.New("the peer does not speak the gpreduce raft handshake (plain raft, or another protocol)")
	}
	if v := head[len(raftHelloMagic)]; v != raftHelloVersion {
		return h, fmt.Errorf("raft handshake version %d, want %d", v, raftHelloVersion)
	}
	copy(h.nonce[:], head[len(raftHelloMagic)+1:])
	id := make([]byte, head[len(head)-1])
	if _, err := io.ReadFull(r, id); err != nil {
		return h, fmt.Errorf("read hello: %w", err)
	}
	h.id = string(id)
	return h, nil
}

// proof is the MAC of role over the transcript.
func proof(key []byte, role string, dialer, listener hello, binding []byte) []byte {
	m := hmac.New(sha256.New, key)
	var n [2]byte
	for _, part := range [][]byte{[]byte(role), dialer.nonce[:], listener.nonce[:], []byte(dialer.id), []byte(listener.id), binding} {
		binary.BigEndian.PutUint16(n[:], uint16(len(part)))
		m.Write(n[:])
		m.Write(part)
	}
	return m.Sum(nil)
}

// nonceHandshake runs the HMAC handshake of RaftSecurity on conn and returns the peer's ID.
func nonceHandshake(conn io.ReadWriter, dialer bool, id string, key, binding []byte) (string, error) {
	mine := hello{id: id}
	if _, err := rand.Read(mine.nonce[:]); err != nil {
		return "", err
	}
	// Both hellos go out at once (neither depends on the other), saving a round trip.
	if err := mine.write(conn); err != nil {
		return "", err
	}
	theirs, err := readHello(conn)
	if err != nil {
		return "", err
	}
	if dialer {
		d, l := mine, theirs
		if _, err := conn.Write(proof(key, raftProofDialer, d, l, binding)); err != nil {
			return "", err
		}
		if err := checkProof(conn, proof(key, raftProofListener, d, l, binding)); err != nil {
			return "", err
		}
		return l.id, nil
	}
	d, l := theirs, mine
	if err := checkProof(conn, proof(key, raftProofDialer, d, l, binding)); err != nil {
		return "", err
	}
	if _, err := conn.Write(proof(key, raftProofListener, d, l, binding)); err != nil {
		return "", err
	}
	return d.id, nil
}

// checkProof reads the peer's MAC and compares it with want in constant time.
func checkProof(r io.Reader, want []byte) error {
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		return fmt.Errorf("read proof: %w (the peer may hold another raft secret)", err)
	}
	if !hmac.Equal(got, want) {
		return errors.New("wrong proof: the peer does not hold this cluster's raft secret")
	}
	return nil
}

// isLoopbackAddr reports whether host:port names a loopback address (an IP or "localhost").
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
