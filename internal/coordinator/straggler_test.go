package coordinator

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/worker"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestHungWorkerJobMatchesLocal: one of three workers keeps heartbeating but never finishes a
// task. Its shards run again on the other workers once they pass the straggler deadline, the
// job succeeds long before the (10 minute) task timeout, its events name the slow worker, and
// the model is byte-identical to the local engine's.
func TestHungWorkerJobMatchesLocal(t *testing.T) {
	t.Parallel()
	s := startSingle(t, func(c *ServerConfig) {
		c.TaskTimeout = 10 * time.Minute
		c.StragglerFloor = time.Second
	})
	log := testLogger(t)
	hung := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if info.FullMethod == pb.Worker_RunTask_FullMethodName {
			<-ctx.Done() // hung: the task never returns, the heartbeats go on
			return nil, ctx.Err()
		}
		return next(ctx, req)
	}
	for _, name := range []string{"fast-1", "hung", "fast-2"} {
		cfg := worker.Config{Join: []string{s.APIAddr()}, Listen: "127.0.0.1:0", Cores: 2, Name: name, Logger: log, CacheBytes: 64 << 20}
		if name == "hung" {
			cfg.Interceptor = hung
		}
		runWorker(t, cfg)
	}
	waitWorkers(t, s.Server, 3)

	js := glSpec(writeCSV(t, t.TempDir(), "d.csv", 2000, 11), 10, 6)
	want := localModel(t, js)
	c := dial(t, s.APIAddr(), "")
	start := time.Now()
	if _, err := c.SubmitJob(testContext(t), &pb.SubmitJobRequest{Spec: js, Id: "straggling"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "straggling", pb.JobState_JOB_STATE_SUCCEEDED, 3*time.Minute)
	t.Logf("job with a hung worker succeeded in %s", time.Since(start).Round(time.Millisecond))
	if got := fetchModel(t, c, "straggling"); !bytes.Equal(got, want) {
		t.Fatalf("model with a hung worker: %d bytes, differs from the local engine's %d bytes", len(got), len(want))
	}
	evs, err := watch(t, c, "straggling")
	if err != nil {
		t.Fatal(err)
	}
	var slow, won int
	for _, ev := range evs {
		if ev.GetPhase() != "straggler" {
			continue
		}
		t.Log(ev.GetMessage())
		switch m := ev.GetMessage(); {
		case strings.Contains(m, "worker hung") && strings.Contains(m, "is slow"):
			slow++
		case strings.Contains(m, "finished first; worker hung"):
			won++
		}
	}
	if slow == 0 || won == 0 {
		t.Errorf("events name the hung worker as slow %d times and overtaken %d times; want both", slow, won)
	}
	j, err := c.GetJob(testContext(t), &pb.GetJobRequest{Id: "straggling"})
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, w := range j.GetWarnings() {
		named = named || (w.GetCode() == "straggler" && strings.Contains(w.GetMessage(), "worker hung"))
	}
	if !named {
		t.Errorf("the job status does not name the slow worker: warnings %v", j.GetWarnings())
	}
}
