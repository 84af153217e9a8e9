package coordinator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpreduce/gpreduce/internal/auth"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// maxMessageBytes bounds gRPC messages both ways (task broadcasts and statistics can be large).
const maxMessageBytes = 1 << 30

// connCache keeps one gRPC client connection per address, all with the same credentials:
// TLS when configured and a bearer token when one is given. It is safe for concurrent use.
type connCache struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newConnCache(token string, tlsCfg *tls.Config) *connCache {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.PerRPC(token, tlsCfg != nil)))
	}
	return &connCache{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

// errConnsClosed means the cache was closed (the server is shutting down).
var errConnsClosed = errors.New("connection cache closed")

// get returns the connection to addr, creating it (without connecting yet) if needed.
func (c *connCache) get(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errConnsClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

// worker is a remote.Dialer over the cache.
func (c *connCache) worker(_ context.Context, addr string) (pb.WorkerClient, error) {
	cc, err := c.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewWorkerClient(cc), nil
}

// coordinator returns a Coordinator client for addr.
func (c *connCache) coordinator(addr string) (pb.CoordinatorClient, error) {
	cc, err := c.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewCoordinatorClient(cc), nil
}

// forget closes the connection to addr, if any.
func (c *connCache) forget(addr string) {
	c.mu.Lock()
	cc, ok := c.conns[addr]
	delete(c.conns, addr)
	c.mu.Unlock()
	if ok {
		_ = cc.Close()
	}
}

// close closes every connection; later gets fail.
func (c *connCache) close() {
	c.mu.Lock()
	conns := c.conns
	c.conns, c.closed = nil, true
	c.mu.Unlock()
	for _, cc := range conns {
		_ = cc.Close()
	}
}
