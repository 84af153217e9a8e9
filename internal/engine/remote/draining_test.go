package remote

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestDrainingWorkerFinishesRunningTasks: a worker that starts stopping mid-round refuses its
// next task (wire.DrainingStatus); the round moves its other shards elsewhere but does not
// cancel the task it is running, whose result is accepted, and the round gives the local
// engine's bits. (A failed worker's running attempts are cancelled instead.)
func TestDrainingWorkerFinishesRunningTasks(t *testing.T) {
	c := newCluster(t)
	var calls atomic.Int32
	var cancelled atomic.Bool
	var refusedOnce sync.Once
	refused := make(chan struct{})
	c.start("w1", nil)
	c.start("w2", func(ctx context.Context, _ *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
		if calls.Add(1) > 1 {
			refusedOnce.Do(func() { close(refused) })
			return wire.DrainingStatus()
		}
		// The first task runs on until the round has taken in the refusal of a later one.
		select {
		case <-refused:
		case <-ctx.Done():
			cancelled.Store(true)
			return status.FromContextError(ctx.Err()).Err()
		}
		for deadline := time.Now().Add(waitLimit); !strings.Contains(c.logs.String(), "worker draining"); time.Sleep(time.Millisecond) {
			if ctx.Err() != nil {
				cancelled.Store(true)
				return status.FromContextError(ctx.Err()).Err()
			}
			if time.Now().After(deadline) {
				t.Errorf("the round did not log the draining worker within %v", waitLimit)
				return nil
			}
		}
		return nil
	})
	c.start("w3", nil)
	e := c.engine(func(cfg *Config) {
		cfg.TaskTimeout = time.Hour // only the round, not a timeout, may end the running task
		cfg.ShardTimeout = time.Hour
	})
	want, err := c.local().Reduce(context.Background(), shard.MomentsTask{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Reduce(context.Background(), shard.MomentsTask{})
	if err != nil {
		t.Fatal(err)
	}
	if string(statBytes(t, got)) != string(statBytes(t, want)) {
		t.Error("the round's result differs from the local engine's")
	}
	if cancelled.Load() {
		t.Error("the round cancelled the draining worker's running task")
	}
	if calls.Load() < 2 {
		t.Fatalf("w2 got %d tasks; the test needs two at once", calls.Load())
	}
	if ran := c.worker("w2").shardsRun(1); len(ran) != 1 {
		t.Errorf("the draining worker answered shards %v, want exactly its running one", ran)
	}
	accepted := false
	c.mu.Lock()
	for _, ev := range c.events {
		accepted = accepted || (ev.Worker.ID == "w2" && ev.Err == nil)
	}
	c.mu.Unlock()
	if !accepted {
		t.Error("no successful task event from the draining worker")
	}
}
