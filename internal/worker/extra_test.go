package worker

import (
	"context"
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
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/testutil"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestRunTaskUCI runs the moments pass over the shards of a UCI split through the worker
// and checks them against PartitionCount of LoadUCI, as `coordinator eval --uci` cuts them.
func TestRunTaskUCI(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(testutil.SharedData(t), "uci", "yacht")
	train, _, err := shard.LoadUCI(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	src := shard.Source{URI: dir, Format: "uci", Split: 3}
	refs, err := shard.Plan(ctx, src, 5)
	if err != nil {
		t.Fatal(err)
	}
	wantRefs, wantTabs := shard.PartitionCount(train, 5)
	w := startWorker(t, Config{Cores: 2, UnregisteredTasks: true})
	c := workerClient(t, w.Addr(), "")
	task, _ := wire.EncodeTask(shard.MomentsTask{})
	for i, r := range refs {
		if r != wantRefs[i] {
			t.Fatalf("shard %d: %+v, want %+v", i, r, wantRefs[i])
		}
		resp, err := c.RunTask(ctx, &pb.RunTaskRequest{Source: wire.EncodeSource(src), Shard: wire.EncodeRef(r), Task: task})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := wire.DecodeStats(resp.Stats)
		want, _ := shard.MomentsTask{}.Map(ctx, r, wantTabs[i])
		if diff := sameBits(got, want); diff != "" {
			t.Fatalf("shard %d: %s", i, diff)
		}
	}
}

// TestServerSideCancel calls the service in-process with a canceled context.
func TestServerSideCancel(t *testing.T) {
	path := writeData(t, t.TempDir(), 50)
	w, err := New(Config{Join: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0", Cores: 1, UnregisteredTasks: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	task, _ := wire.EncodeTask(shard.MomentsTask{})
	for i := 0; i < 10; i++ { // acquire races the done context: try both ways
		_, err := w.RunTask(ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: path, Header: true}, Shard: &pb.ShardRef{}, Task: task})
		if status.Code(err) != codes.Canceled {
			t.Fatalf("got %v; want Canceled", err)
		}
	}
	if w.cache.len() != 0 {
		t.Errorf("a canceled load was cached")
	}
}

// TestTLS registers a TLS worker with a TLS coordinator (mutual TLS, join token) and calls
// the worker's service over TLS.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := makePKI(t, dir)
	serverTLS, err := auth.ServerTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := auth.ClientTLS(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCoordinator{addr: lis.Addr().String(), interval: 20 * time.Millisecond, heartbeats: map[string]int{}, known: map[string]bool{}}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)),
		grpc.UnaryInterceptor(auth.UnaryServerInterceptor(auth.Static("tok"), zerolog.Nop())))
	pb.RegisterCoordinatorServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	w := startWorker(t, Config{Join: []string{f.addr}, JoinToken: "tok", ServerTLS: serverTLS, ClientTLS: clientTLS})
	eventually(t, "heartbeats over TLS", func() bool { return f.beats("w1") >= 2 })

	conn, err := grpc.NewClient(w.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)),
		grpc.WithPerRPCCredentials(auth.PerRPC("tok", true)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := pb.NewWorkerClient(conn).Health(context.Background(), &pb.HealthRequest{})
	if err != nil || h.WorkerId != "w1" {
		t.Fatalf("health over TLS: %v, %v", h, err)
	}
	// Without a client certificate the worker refuses the connection.
	noCert, _ := auth.ClientTLS(ca, "", "")
	conn2, err := grpc.NewClient(w.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(noCert)),
		grpc.WithPerRPCCredentials(auth.PerRPC("tok", true)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pb.NewWorkerClient(conn2).Health(ctx, &pb.HealthRequest{}); err == nil {
		t.Fatal("a client without a certificate got through")
	}
}

// makePKI writes a CA and one certificate for 127.0.0.1, good for both server and client
// authentication, and returns the CA, certificate and key files.
func makePKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(leafKey)
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
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "EC PRIVATE KEY", kb)
}
