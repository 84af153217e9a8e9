package coordinator

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// transportPool is the number of pooled connections the raft transport keeps per peer.
const transportPool = 3

// hostAddr is a net.Addr held as "host:port" with the host possibly a DNS name, so that a
// member's raft address survives a change of its IP (a Kubernetes pod rescheduled under the
// same stable name).
type hostAddr string

// Network returns "tcp".
func (hostAddr) Network() string { return "tcp" }

// String returns the address as given.
func (a hostAddr) String() string { return string(a) }

// tcpStream is a raft.StreamLayer over plain TCP that advertises an address given as
// host:port, a DNS name or an IP; peers dial it by that name, resolved anew on every dial.
type tcpStream struct {
	net.Listener
	advertise net.Addr
}

// Dial opens a connection to a peer's raft address.
func (t *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// Addr returns the advertised address.
func (t *tcpStream) Addr() net.Addr { return t.advertise }

// advertisedRaftAddr checks the address the other members dial: advertise if set (a
// host:port whose host is a DNS name or a specified IP), else the bound listener address,
// which must then have a specified IP.
func advertisedRaftAddr(advertise string, bound net.Addr) (net.Addr, error) {
	if advertise == "" {
		tcp, ok := bound.(*net.TCPAddr)
		if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
			return nil, fmt.Errorf("raft address %s is not one the other members can dial: give an advertise address (host:port)", bound)
		}
		return bound, nil
	}
	host, port, err := net.SplitHostPort(advertise)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
	}
	if host == "" || port == "" || port == "0" {
		return nil, fmt.Errorf("raft advertise address %q: give a host (DNS name or IP) and a port", advertise)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("raft advertise address %q: %s is not an address the other members can dial", advertise, host)
	}
	return hostAddr(advertise), nil
}

// newRaftTransport listens on cfg.RaftAddr and returns raft's network transport over plain
// TCP, advertising cfg.AdvertiseAddr (a DNS name or an IP) or else the bound address.
func newRaftTransport(cfg Config, log hclog.Logger) (*raft.NetworkTransport, error) {
	lis, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, err
	}
	adv, err := advertisedRaftAddr(cfg.AdvertiseAddr, lis.Addr())
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	return raft.NewNetworkTransportWithLogger(&tcpStream{Listener: lis, advertise: adv}, transportPool, cfg.TransportTimeout, log), nil
}
