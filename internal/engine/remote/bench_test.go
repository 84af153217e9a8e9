package remote

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/worker"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// BenchmarkCGIterationWorkers times one batched CG product K_hat V (n = 4096 rows, d = 8,
// 11 columns: 10 probes and y) through the remote engine and 1 to 4 real worker services on
// loopback, each running one task at a time (Cores 1), over 16 CSV byte-range shards. Kernel
// blocks are cached on the workers after a warm-up round, as within one CG solve; each
// iteration then costs 2 n^2 11 flops plus sending V (n x 11) to every shard and the rows back.
func BenchmarkCGIterationWorkers(b *testing.B) {
	const n, d, k, shards = 4096, 8, 11, 16
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	var sb strings.Builder
	for c := 0; c < d; c++ {
		fmt.Fprintf(&sb, "x%d,", c)
	}
	sb.WriteString("y\n")
	for i := 0; i < n; i++ {
		s := 0.0
		for c := 0; c < d; c++ {
			v := rng.NormFloat64()
			s += math.Sin(v)
			fmt.Fprintf(&sb, "%.17g,", v)
		}
		fmt.Fprintf(&sb, "%.17g\n", s)
	}
	path := filepath.Join(b.TempDir(), "data.csv")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	src := shard.Source{URI: path, Format: "csv", Header: true, Target: "y"}
	refs, err := shard.Plan(ctx, src, shards)
	if err != nil {
		b.Fatal(err)
	}
	var X []float64
	offsets := []int{0}
	for _, r := range refs {
		t, err := shard.Load(ctx, src, r)
		if err != nil {
			b.Fatal(err)
		}
		X = append(X, t.X...)
		offsets = append(offsets, offsets[len(offsets)-1]+t.N())
	}
	V := make([]float64, n*k)
	for i := range V {
		V[i] = rng.NormFloat64()
	}
	for _, workers := range []int{1, 2, 3, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			c := newCluster(b)
			c.refs = refs
			for i := 1; i <= workers; i++ {
				w, err := worker.New(worker.Config{Join: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0", Cores: 1, UnregisteredTasks: true})
				if err != nil {
					b.Fatal(err)
				}
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				srv := grpc.NewServer(grpc.MaxRecvMsgSize(worker.MaxMessageBytes), grpc.MaxSendMsgSize(worker.MaxMessageBytes))
				pb.RegisterWorkerServer(srv, w)
				go func() { _ = srv.Serve(lis) }()
				b.Cleanup(srv.Stop)
				c.pool.add(Worker{ID: fmt.Sprintf("w%d", i), Addr: lis.Addr().String()})
			}
			rem := c.engine(func(cfg *Config) { cfg.Source = src })
			op := &tasks.KernelOp{Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1, 1, 1, 1, 1, 1, 1, 1}, SignalVariance: 1}, X: X, Offsets: offsets}
			task := &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: k, V: V}
			if _, err := rem.Reduce(ctx, task); err != nil { // loads the shards, sends X, forms the blocks
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := rem.Reduce(ctx, task); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*2*float64(n)*float64(n)*k/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
