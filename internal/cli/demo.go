package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/coordinator"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	"github.com/gpreduce/gpreduce/internal/worker"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// maunaLoa is monthly atmospheric CO2 at Mauna Loa, 1959-1997 (decimal year, ppm), the
// classic one-dimensional GP example, shipped so the demo needs nothing else.
//
//go:embed testdata/maunaloa_co2.csv
var maunaLoa []byte

// demoSpec is the demo's method: Gauss-Legendre features with an RBF kernel. The seasonal
// cycle is about 0.09 standard deviations of the year column long, so lengthscales go down
// to 0.02 (a quarter of a year); the upper bound 0.3 keeps the grid below a thousand nodes.
func demoSpec() train.Spec {
	s := train.DefaultSpec("gl")
	s.LengthscaleBounds = [2]float64{0.02, 0.3}
	s.NoiseVarianceBounds = [2]float64{1e-4, 1}
	return s
}

// demoSplit holds out every tenth month for testing.
func demoSplit() (tr, te *shard.Table, err error) {
	all, err := shard.ReadCSV(bytes.NewReader(maunaLoa), "maunaloa_co2.csv (embedded)", shard.CSVOptions{Header: true})
	if err != nil {
		return nil, nil, err
	}
	tr = &shard.Table{Source: all.Source + " train", Columns: all.Columns, Target: all.Target, D: all.D}
	te = &shard.Table{Source: all.Source + " test", Columns: all.Columns, Target: all.Target, D: all.D}
	for i := 0; i < all.N(); i++ {
		dst := tr
		if i%10 == 9 {
			dst = te
		}
		dst.X = append(dst.X, all.Row(i)...)
		dst.Y = append(dst.Y, all.Y[i])
	}
	return tr, te, nil
}

func newDemoCmd(e *env) *cobra.Command {
	var out string
	var rf runFlags
	var local bool
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Train Gauss-Legendre features on the bundled Mauna Loa CO2 series and report test metrics",
		Long: `demo trains a GP with Gauss-Legendre features (RBF kernel) on monthly Mauna Loa CO2,
1959-1997, holding out every tenth month, prints test RMSE, NLL and 95% coverage in ppm,
and writes the model to --out.

It runs the real stack in this process: a one-member raft coordinator and two workers,
talking gRPC on loopback, with the training rows in a temporary CSV file; the job is
submitted, watched and its model fetched as with submit --wait. --local trains with the
in-process engine instead; both give the same model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			tr, te, err := demoSplit()
			if err != nil {
				return err
			}
			where := "on a one-member cluster (raft coordinator + 2 workers, gRPC on loopback)"
			if local {
				where = "with the in-process engine"
			}
			if !o.structured() {
				fmt.Fprintf(e.out, "gpreduce demo: Mauna Loa CO2, %d training and %d test months, Gauss-Legendre features %s\n", tr.N(), te.N(), where)
			}
			var r *evalResult
			var b []byte
			if local {
				pr := newProgress(e.errOut, e.tty)
				var m *model.Model
				var td trainData
				if td, err = demoLocalData(cmd.Context(), tr, rf); err == nil {
					r, m, err = evaluate(cmd.Context(), demoSpec(), td, te, rf, pr.observe)
				}
				pr.done()
				if err == nil {
					b, err = m.Bytes()
				}
			} else {
				// The in-process cluster's expected warnings (tokens without TLS on loopback,
				// workers waiting for the election) would only clutter the demo.
				log := e.log
				if !cmd.Flags().Changed("log-level") {
					log = log.Level(zerolog.ErrorLevel)
				}
				r, b, err = clusterDemo(cmd.Context(), e, log, tr, te, rf)
			}
			if err != nil {
				return err
			}
			if err := writeFileAtomic(out, b); err != nil {
				return fmt.Errorf("write model: %w", err)
			}
			if abs, err := filepath.Abs(out); err == nil {
				r.ModelPath = abs
			} else {
				r.ModelPath = out
			}
			return o.print(e.out, r, func(w io.Writer) error {
				printResult(w, r)
				_, err := fmt.Fprintf(w, "\npredict with: coordinator predict --model %s --data X.csv --out preds.csv\n", r.ModelPath)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&out, "out", "gpreduce-demo.gpm", "where to write the trained model")
	cmd.Flags().BoolVar(&local, "local", false, "train with the in-process engine instead of the in-process cluster")
	rf.register(cmd)
	of.register(cmd)
	return cmd
}

// demoShards is the demo job's shard count: --shards, or shard.DefaultShards.
func demoShards(tr *shard.Table, rf runFlags) (int, error) {
	if rf.shards < 0 {
		return 0, fmt.Errorf("--shards %d: must be positive", rf.shards)
	}
	if rf.shards == 0 {
		return shard.DefaultShards(tr.N()), nil
	}
	return rf.shards, nil
}

// demoReader is the data reader of the demo cluster: confined to dir, which holds the
// training CSV.
func demoReader(dir string) (shard.Reader, error) {
	acc, err := shard.NewAccess([]string{dir}, nil, false)
	if err != nil {
		return shard.Reader{}, fmt.Errorf("demo cluster: %w", err)
	}
	return shard.Reader{Access: acc}, nil
}

// demoLocalData writes tr to a CSV file as the cluster demo does and cuts it as a cluster
// cuts that file, so that --local trains the same model bits as the cluster.
func demoLocalData(ctx context.Context, tr *shard.Table, rf runFlags) (trainData, error) {
	k, err := demoShards(tr, rf)
	if err != nil {
		return trainData{}, err
	}
	dir, err := os.MkdirTemp("", "gpreduce-demo-")
	if err != nil {
		return trainData{}, err
	}
	defer os.RemoveAll(dir)
	csvPath := filepath.Join(dir, "maunaloa_train.csv")
	if err := writeTableCSV(csvPath, tr); err != nil {
		return trainData{}, err
	}
	src := shard.Source{URI: csvPath, Format: "csv", Header: true, Target: tr.Target, Columns: tr.Columns}
	l, tabs, err := shard.Reader{}.LoadAll(ctx, src, k)
	if err != nil {
		return trainData{}, err
	}
	return trainData{all: concatTables(tabs), refs: l.Refs, tabs: tabs}, nil
}

// Raft timings of the demo's one-member cluster: short, so that it leads at once.
const (
	demoRaftTimeout = 250 * time.Millisecond
	demoWorkers     = 2
)

// clusterDemo trains the demo job on a cluster in this process: a one-member raft
// coordinator and demoWorkers workers on loopback with random tokens, the training rows in a
// CSV file in a temporary directory. It submits the job, shows its progress, fetches the
// model and scores it on te. It returns the report and the model's bytes.
func clusterDemo(ctx context.Context, e *env, log zerolog.Logger, tr, te *shard.Table, rf runFlags) (*evalResult, []byte, error) {
	k, err := demoShards(tr, rf)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "gpreduce-demo-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	csvPath := filepath.Join(dir, "maunaloa_train.csv")
	if err := writeTableCSV(csvPath, tr); err != nil {
		return nil, nil, err
	}
	data, err := demoReader(dir)
	if err != nil {
		return nil, nil, err
	}
	token, joinToken := randomToken(), randomToken()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv, err := coordinator.OpenServer(ctx, coordinator.ServerConfig{
		ID: "demo", RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, "raft"), Bootstrap: true,
		Token: token, JoinToken: joinToken, Logger: log.With().Str("component", "coordinator").Logger(),
		Raft: coordinator.RaftTuning{HeartbeatTimeout: demoRaftTimeout, ElectionTimeout: demoRaftTimeout}, Data: data,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("demo cluster: %w", err)
	}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		if err := srv.Close(); err != nil {
			log.Error().Err(err).Msg("closing the demo coordinator")
		}
	}()
	runErr := make(chan error, demoWorkers+1)
	wg.Go(func() {
		if err := srv.Run(ctx); err != nil {
			runErr <- err
		}
	})
	cores := max(1, rf.workers/demoWorkers)
	for i := 1; i <= demoWorkers; i++ {
		w, err := worker.New(worker.Config{
			Join: []string{srv.APIAddr()}, Listen: "127.0.0.1:0", Name: fmt.Sprintf("demo-worker-%d", i), Cores: cores,
			JoinToken: joinToken, CacheBytes: 256 << 20, Data: data, Logger: log.With().Str("worker", fmt.Sprintf("demo-worker-%d", i)).Logger(),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("demo cluster: %w", err)
		}
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				runErr <- err
			}
		})
	}

	c := newClient([]string{srv.APIAddr()}, dialOptions(token, nil), 10*time.Second, log)
	defer c.Close()
	if err := waitWorkers(ctx, c, demoWorkers, 15*time.Second, runErr); err != nil {
		return nil, nil, fmt.Errorf("demo cluster: %w", err)
	}
	spec, err := buildJobSpec(demoSpec(), shard.Source{URI: csvPath, Format: "csv", Header: true, Target: tr.Target, Columns: tr.Columns},
		k, 0, dir, flagNames)
	if err != nil {
		return nil, nil, err
	}
	var sub *pb.Job
	err = c.do(ctx, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) error {
		sub, err = cl.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: spec, Id: "demo"}, opts...)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("submit: %w", err)
	}
	t0 := time.Now()
	pr := newProgress(e.errOut, e.tty)
	final, err := watchJob(ctx, c, sub.GetId(), func(ev *pb.JobEvent) { pr.observe(trainEvent(ev)) })
	pr.done()
	if err != nil {
		return nil, nil, err
	}
	if err := jobOutcome(final); err != nil {
		return nil, nil, err
	}
	trainSec := time.Since(t0).Seconds()
	b, err := fetchModel(ctx, c, final.GetId())
	if err != nil {
		return nil, nil, err
	}
	m, err := model.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, nil, fmt.Errorf("the model of job %s: %w", final.GetId(), err)
	}
	if s := final.GetMetrics().GetTrainSeconds(); s > 0 {
		trainSec = s
	}
	r, err := score(m, tr, te, k, demoWorkers, trainSec)
	return r, b, err
}

// waitWorkers waits until the leader lists n workers.
func waitWorkers(ctx context.Context, c *client, n int, timeout time.Duration, runErr <-chan error) error {
	deadline := time.Now().Add(timeout)
	for {
		var resp *pb.ListWorkersResponse
		err := c.do(ctx, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) error {
			var err error
			resp, err = cl.ListWorkers(ctx, &pb.ListWorkersRequest{}, opts...)
			return err
		})
		if err == nil && len(resp.GetWorkers()) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("waiting for %d workers: %w", n, err)
			}
			return fmt.Errorf("only %d of %d workers registered after %s", len(resp.GetWorkers()), n, timeout)
		}
		select {
		case err := <-runErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeTableCSV writes a table as CSV with a header, every value in its shortest exact form,
// so that reading the file back gives the same float64s.
func writeTableCSV(path string, t *shard.Table) error {
	var b strings.Builder
	b.WriteString(strings.Join(append(append([]string(nil), t.Columns...), t.Target), ","))
	b.WriteByte('\n')
	for i := 0; i < t.N(); i++ {
		for _, v := range t.Row(i) {
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(t.Y[i], 'g', -1, 64))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write the training rows: %w", err)
	}
	return nil
}

// randomToken returns 128 random bits in hex.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
