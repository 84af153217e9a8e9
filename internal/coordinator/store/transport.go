package store

import (
	"fmt"
	"net"
)

// transportPool is the number of pooled connections the raft transport keeps per peer.
const transportPool = 3

// transportInFlight is the raft transport's MaxRPCsInFlight. 1 turns off pipelined
// replication (hashicorp/raft uses plain AppendEntries RPCs below 2): with the library's
// default of 2 the pipeline's channels are unbuffered, and when a follower rejects an entry
// the pipeline's decoder exits while its sender can park on a send no one receives; the
// replication goroutine then never returns, and Raft.Shutdown waits on it for ever. A
// coordinator test saw exactly that under load (a leader's Close hung for 30 minutes in
// pipelineSend); grafana/pyroscope#5518 describes the same deadlock and turns pipelining off.
// The coordinator's log carries job state and events, not a write-heavy stream, so
// one RPC at a time per follower costs nothing that matters.
const transportInFlight = 1

// hostAddr is a net.Addr held as "host:port" with the host possibly a DNS name, so that a
// member's raft address survives a change of its IP (a Kubernetes pod rescheduled under the
// same stable name).
type hostAddr string

// Network returns "tcp".
func (hostAddr) Network() string { return "tcp" }

// String returns the address as given.
func (a hostAddr) String() string { return string(a) }

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
