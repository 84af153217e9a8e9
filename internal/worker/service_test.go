package worker

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// writeData writes n rows of a noisy 1-D function with a header and returns the path.
func writeData(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("x,y\n")
	for i := 0; i < n; i++ {
		x := float64(i) / float64(n) * 10
		fmt.Fprintf(&b, "%.17g,%.17g\n", x, math.Sin(x)+0.1*math.Cos(float64(i)*7.1))
	}
	path := filepath.Join(dir, "data.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameBits reports how two statistics' messages differ, or "".
func sameBits(a, b reduce.Stats) string {
	ma, err := wire.EncodeStats(a)
	if err != nil {
		return err.Error()
	}
	mb, err := wire.EncodeStats(b)
	if err != nil {
		return err.Error()
	}
	fa, fb := floats(ma), floats(mb)
	if len(fa) != len(fb) {
		return fmt.Sprintf("%d values vs %d", len(fa), len(fb))
	}
	for i := range fa {
		if math.Float64bits(fa[i]) != math.Float64bits(fb[i]) {
			return fmt.Sprintf("value %d: %v vs %v", i, fa[i], fb[i])
		}
	}
	if fmt.Sprint(ints(ma)) != fmt.Sprint(ints(mb)) {
		return fmt.Sprintf("counts %v vs %v", ints(ma), ints(mb))
	}
	return ""
}

func floats(m *pb.Stats) []float64 {
	var out []float64
	switch k := m.Kind.(type) {
	case *pb.Stats_Gram:
		out = append(append(append(out, k.Gram.G...), k.Gram.B...), k.Gram.Yy)
	case *pb.Stats_Moments:
		out = append(append(append(append(out, k.Moments.Mean...), k.Moments.M2...), k.Moments.Min...), k.Moments.Max...)
	}
	return out
}

func ints(m *pb.Stats) []int64 {
	switch k := m.Kind.(type) {
	case *pb.Stats_Gram:
		return []int64{int64(k.Gram.S), k.Gram.N}
	case *pb.Stats_Moments:
		return []int64{k.Moments.N}
	}
	return nil
}

// TestRunTaskMatchesLocal runs the moments and Gram passes through the worker's gRPC
// service and checks every shard's statistic bit for bit against the task run locally on
// shard.Load's table.
func TestRunTaskMatchesLocal(t *testing.T) {
	ctx := context.Background()
	path := writeData(t, t.TempDir(), 3000)
	w := startWorker(t, Config{Cores: 2, JoinToken: "tok", UnregisteredTasks: true})
	c := workerClient(t, w.Addr(), "tok")
	src := shard.Source{URI: path, Header: true, Target: "y"}
	refs, err := shard.Plan(ctx, src, 4)
	if err != nil {
		t.Fatal(err)
	}
	gl, err := features.NewGL(kernel.RBF, []float64{5}, []int{16})
	if err != nil {
		t.Fatal(err)
	}
	// The transform comes from the merged moments, as in training.
	var tabs []*shard.Table
	for _, r := range refs {
		tab, err := shard.Load(ctx, src, r)
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, tab)
	}
	eng, err := engine.NewLocal(refs, tabs, 1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := eng.Reduce(ctx, shard.MomentsTask{})
	if err != nil {
		t.Fatal(err)
	}
	tf, err := shard.NewTransform(m.(*reduce.Moments), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []engine.Task{shard.MomentsTask{}, &tasks.GramTask{Features: gl, Transform: tf}} {
		msg, err := wire.EncodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		for round := uint64(1); round <= 2; round++ { // the second round runs on cached shards
			for i, r := range refs {
				want, err := task.Map(ctx, r, tabs[i])
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.RunTask(ctx, &pb.RunTaskRequest{JobId: "job-1", Round: round, Source: wire.EncodeSource(src),
					Shard: wire.EncodeRef(r), Task: msg})
				if err != nil {
					t.Fatal(err)
				}
				if resp.JobId != "job-1" || resp.Round != round || resp.Shard != int32(r.Index) {
					t.Errorf("response for %s round %d shard %d", resp.JobId, resp.Round, resp.Shard)
				}
				got, err := wire.DecodeStats(resp.Stats)
				if err != nil {
					t.Fatal(err)
				}
				if diff := sameBits(got, want); diff != "" {
					t.Fatalf("%T, round %d, %v: %s", task, round, r, diff)
				}
			}
		}
	}
	h, err := c.Health(ctx, &pb.HealthRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Cores != 2 || h.CachedShards != int32(len(refs)) {
		t.Errorf("health %+v; want 2 cores and %d cached shards", h, len(refs))
	}
	resp, err := c.LoadShard(ctx, &pb.LoadShardRequest{JobId: "other-job", Source: wire.EncodeSource(src), Shard: wire.EncodeRef(refs[1])})
	if err != nil || resp.Rows != int64(tabs[1].N()) {
		t.Errorf("LoadShard: %v, %v; want %d rows", resp, err, tabs[1].N())
	}
	if h, _ := c.Health(ctx, &pb.HealthRequest{}); h.CachedShards != int32(len(refs)) {
		t.Errorf("another job's LoadShard of a cached shard changed the cache: %d shards", h.CachedShards)
	}
}

func TestRunTaskErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	good := writeData(t, dir, 50)
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("x,y\n1,2\n3,oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.csv")
	w := startWorker(t, Config{Cores: 1, JoinToken: "tok", UnregisteredTasks: true})
	c := workerClient(t, w.Addr(), "tok")
	moments, _ := wire.EncodeTask(shard.MomentsTask{})
	gl2, err := features.NewGL(kernel.RBF, []float64{5, 5}, []int{4, 4})
	if err != nil {
		t.Fatal(err)
	}
	tf2 := shard.Transform{XMean: []float64{0, 0}, XScale: []float64{1, 1}, YScale: 1}
	gram2, err := wire.EncodeTask(&tasks.GramTask{Features: gl2, Transform: tf2})
	if err != nil {
		t.Fatal(err)
	}
	whole := &pb.ShardRef{Index: 0, Source: good, Offset: 0, Length: 1 << 10}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *pb.RunTaskRequest
		code codes.Code
		want []string
	}{
		{"missing file", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: missing, Header: true}, Shard: &pb.ShardRef{Length: 10}, Task: moments},
			codes.FailedPrecondition, []string{missing, "no such file"}},
		{"bad row", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: bad, Header: true}, Shard: &pb.ShardRef{Length: 15}, Task: moments},
			codes.FailedPrecondition, []string{bad + ":3:2:", "(4 bytes, with letters) is not a number"}},
		{"changed source", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good, Header: true}, Shard: &pb.ShardRef{Offset: 10, Length: 1 << 20}, Task: moments},
			codes.FailedPrecondition, []string{good, "past the end"}},
		{"no task", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good, Header: true}, Shard: whole},
			codes.InvalidArgument, []string{"no task"}},
		{"empty task", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good, Header: true}, Shard: whole, Task: &pb.Task{}},
			codes.InvalidArgument, []string{"unknown kind"}},
		{"malformed Gram task", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good, Header: true}, Shard: whole,
			Task: &pb.Task{Kind: &pb.Task_Gram{Gram: &pb.GramTask{}}}}, codes.InvalidArgument, []string{"exactly one feature map"}},
		{"task for other inputs", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good, Header: true}, Shard: whole, Task: gram2},
			codes.InvalidArgument, []string{"2 inputs but the shard has 1"}},
		{"no source", ctx, &pb.RunTaskRequest{Shard: whole, Task: moments}, codes.InvalidArgument, []string{"no data source"}},
		{"no shard", ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good}, Task: moments}, codes.InvalidArgument, []string{"no shard"}},
		{"canceled", canceled, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good, Header: true}, Shard: whole, Task: moments},
			codes.Canceled, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.RunTask(tc.ctx, tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("got %v; want code %v", err, tc.code)
			}
			for _, s := range tc.want {
				if !strings.Contains(status.Convert(err).Message(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
	_, err = c.LoadShard(ctx, &pb.LoadShardRequest{Source: &pb.DataSource{Uri: missing}, Shard: &pb.ShardRef{Length: 10}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), missing) {
		t.Errorf("LoadShard of a missing file: %v", err)
	}
}

func TestWorkerServiceNeedsJoinToken(t *testing.T) {
	logs := &syncBuffer{}
	w := startWorker(t, Config{JoinToken: "right", Logger: testLogger(logs), UnregisteredTasks: true})
	for _, tc := range []struct {
		token string
		code  codes.Code
		msg   string
	}{
		{"right", codes.OK, ""},
		{"wrong", codes.Unauthenticated, "wrong token for /gpreduce.v1.Worker/"},
		{"", codes.Unauthenticated, "missing bearer token"},
	} {
		c := workerClient(t, w.Addr(), tc.token)
		_, err := c.Health(context.Background(), &pb.HealthRequest{})
		_, err2 := c.RunTask(context.Background(), &pb.RunTaskRequest{})
		if tc.code == codes.OK {
			if err != nil || status.Code(err2) != codes.InvalidArgument {
				t.Errorf("token %q: %v, %v", tc.token, err, err2)
			}
			continue
		}
		for _, e := range []error{err, err2} {
			if status.Code(e) != tc.code || !strings.Contains(e.Error(), tc.msg) {
				t.Errorf("token %q: %v; want %v with %q", tc.token, e, tc.code, tc.msg)
			}
		}
	}
	if !containsAll(logs.String(), `"level":"warn"`, "/gpreduce.v1.Worker/Health", "rejected") {
		t.Errorf("rejections not logged:\n%s", logs)
	}
}

// TestConcurrencyBoundedByCores floods a 2-core worker with tasks and checks that no more
// than 2 ever ran at once, and that they all gave the same answer.
func TestConcurrencyBoundedByCores(t *testing.T) {
	ctx := context.Background()
	path := writeData(t, t.TempDir(), 20000)
	w := startWorker(t, Config{Cores: 2, UnregisteredTasks: true})
	c := workerClient(t, w.Addr(), "")
	src := &pb.DataSource{Uri: path, Header: true}
	gl, err := features.NewGL(kernel.RBF, []float64{5}, []int{64})
	if err != nil {
		t.Fatal(err)
	}
	task, err := wire.EncodeTask(&tasks.GramTask{Features: gl, Transform: shard.Transform{XMean: []float64{5}, XScale: []float64{3}, YScale: 1}})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := shard.Plan(ctx, wire.DecodeSource(src), 3)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]*pb.RunTaskResponse, 24)
	errs := make([]error, len(results))
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.RunTask(ctx, &pb.RunTaskRequest{JobId: "j", Round: 1, Source: src,
				Shard: wire.EncodeRef(refs[i%len(refs)]), Task: task})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	if p := w.peak.Load(); p > 2 || p < 1 {
		t.Errorf("%d tasks ran at once on 2 cores", p)
	}
	for i := len(refs); i < len(results); i++ {
		a, _ := wire.DecodeStats(results[i].Stats)
		b, _ := wire.DecodeStats(results[i%len(refs)].Stats)
		if diff := sameBits(a, b); diff != "" {
			t.Fatalf("duplicate task %d differs: %s", i, diff)
		}
	}
	t.Logf("peak concurrency %d", w.peak.Load())
}

func TestMetricsEndpoint(t *testing.T) {
	ctx := context.Background()
	path := writeData(t, t.TempDir(), 100)
	w := startWorker(t, Config{MetricsAddr: "127.0.0.1:0", JoinToken: "tok", UnregisteredTasks: true})
	c := workerClient(t, w.Addr(), "tok")
	moments, _ := wire.EncodeTask(shard.MomentsTask{})
	src := &pb.DataSource{Uri: path, Header: true}
	if _, err := c.RunTask(ctx, &pb.RunTaskRequest{Source: src, Shard: &pb.ShardRef{}, Task: moments}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunTask(ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: path + ".gone"}, Shard: &pb.ShardRef{Length: 1}, Task: moments}); err == nil {
		t.Fatal("missing file accepted")
	}
	resp, err := http.Get("http://" + w.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`gpreduce_worker_tasks_total{kind="moments",outcome="ok"} 1`,
		`gpreduce_worker_tasks_total{kind="moments",outcome="data_error"} 1`,
		`gpreduce_worker_task_duration_seconds_count{kind="moments"} 2`,
		"gpreduce_worker_cached_shards 1",
		"gpreduce_worker_cache_bytes 1600",
		`gpreduce_worker_shard_lookups_total{from="source"} 1`,
		"gpreduce_worker_shard_load_failures_total 1",
		"gpreduce_worker_tasks_running 0",
		"go_goroutines",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no join", Config{Listen: ":0"}, "no coordinator address"},
		{"empty join", Config{Join: []string{""}, Listen: ":0"}, "no coordinator address"},
		{"no listen", Config{Join: []string{"a:1"}}, "no listen address"},
		{"bad listen", Config{Join: []string{"a:1"}, Listen: "nope"}, "listen address"},
		{"negative cores", Config{Join: []string{"a:1"}, Listen: ":0", Cores: -1}, "cores"},
		{"negative blob budget", Config{Join: []string{"a:1"}, Listen: ":0", BlobCacheBytes: -1}, "negative cache budget"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	w, err := New(Config{Join: []string{"a:1"}, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.Cores < 1 || w.cfg.CacheBytes != DefaultCacheBytes || w.cfg.BlobCacheBytes != wire.DefaultBlobCacheBytes || w.cfg.Name == "" {
		t.Errorf("defaults not filled in: %+v", w.cfg)
	}
}

func TestRunLifecycle(t *testing.T) {
	w, err := New(Config{Join: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-w.Ready()
	if !strings.HasPrefix(w.Addr(), "127.0.0.1:") || strings.HasSuffix(w.Addr(), ":0") {
		t.Errorf("Addr %q", w.Addr())
	}
	if err := w.Run(ctx); err == nil {
		t.Error("second Run accepted")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not stop")
	}
	// A port in use is an error from Run.
	busy := startWorker(t, Config{Listen: "127.0.0.1:0"})
	w2, _ := New(Config{Join: []string{"127.0.0.1:1"}, Listen: busy.Addr()})
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("busy port: %v", err)
	}
}

func TestAdvertiseAddr(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		advertise, listen, want string
		bad                     bool
	}{
		{"", "127.0.0.1:7000", "127.0.0.1:7000", false},
		{"", "0.0.0.0:7000", host + ":7000", false},
		{"", "[::]:7000", host + ":7000", false},
		{"", ":7000", host + ":7000", false},
		{"pod-1.workers:7000", "0.0.0.0:7000", "pod-1.workers:7000", false},
		{"nope", "0.0.0.0:7000", "", true},
	} {
		got, err := advertiseAddr(tc.advertise, tc.listen)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("advertiseAddr(%q, %q) = %q, %v; want %q", tc.advertise, tc.listen, got, err, tc.want)
		}
	}
}
