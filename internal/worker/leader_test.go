package worker

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestTasksOnlyFromRegisteredLeader: with the join token alone a caller cannot run tasks or
// load shards on a worker; it needs the session of the worker's latest registration, which
// only the coordinator it registered with knows, and a new registration retires the old one.
func TestTasksOnlyFromRegisteredLeader(t *testing.T) {
	ctx := context.Background()
	path := writeData(t, t.TempDir(), 200)
	src := shard.Source{URI: path, Header: true, Target: "y"}
	refs, err := shard.Plan(ctx, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	task, err := wire.EncodeTask(shard.MomentsTask{})
	if err != nil {
		t.Fatal(err)
	}
	l := startCoordinator(t, "tok")
	w := startWorker(t, Config{Join: []string{l.addr}, JoinToken: "tok"})
	c := workerClient(t, w.Addr(), "tok")
	eventually(t, "registered", func() bool { return w.ID() == "w1" })

	call := func(session string) (error, error) {
		cctx := ctx
		if session != "" {
			cctx = metadata.AppendToOutgoingContext(ctx, wire.SessionKey, session)
		}
		_, runErr := c.RunTask(cctx, &pb.RunTaskRequest{JobId: "j", Round: 1, Source: wire.EncodeSource(src), Shard: wire.EncodeRef(refs[0]), Task: task})
		_, loadErr := c.LoadShard(cctx, &pb.LoadShardRequest{JobId: "j", Source: wire.EncodeSource(src), Shard: wire.EncodeRef(refs[1])})
		return runErr, loadErr
	}
	check := func(step, session string, ok bool) {
		t.Helper()
		for i, err := range func() []error { r, l := call(session); return []error{r, l} }() {
			method := []string{"RunTask", "LoadShard"}[i]
			switch {
			case ok && err != nil:
				t.Errorf("%s: %s with session %q: %v", step, method, session, err)
			case !ok && status.Code(err) != codes.Aborted:
				t.Errorf("%s: %s with session %q: %v, want ABORTED", step, method, session, err)
			}
		}
	}
	check("first registration", "", false)
	check("first registration", "forged", false)
	check("first registration", fakeSession(1), true)

	// The leader forgets the worker, which registers again with a new session.
	l.mu.Lock()
	l.forget = 1
	l.mu.Unlock()
	eventually(t, "registered again", func() bool { return w.ID() == "w2" })
	check("second registration", fakeSession(1), false)
	check("second registration", fakeSession(2), true)

	// A worker that never registered takes no task at all.
	lone := startWorker(t, Config{JoinToken: "tok"})
	_, err = workerClient(t, lone.Addr(), "tok").RunTask(metadata.AppendToOutgoingContext(ctx, wire.SessionKey, fakeSession(1)),
		&pb.RunTaskRequest{JobId: "j", Round: 1, Source: wire.EncodeSource(src), Shard: wire.EncodeRef(refs[0]), Task: task})
	if status.Code(err) != codes.Aborted {
		t.Errorf("unregistered worker: %v, want ABORTED", err)
	}
}

// TestBlackholedLeader: when the leader stops answering (calls hang, as with a SIGSTOPped
// process), the worker gives up on it after heartbeatMisses heartbeat deadlines and registers
// with the new leader through a follower that names it, rather than retrying the stalled
// leader. The test counts the heartbeats that hung on the old leader instead of timing the
// move, which a loaded machine may slow.
func TestBlackholedLeader(t *testing.T) {
	old := startCoordinator(t, "tok")
	follower := startCoordinator(t, "tok")
	next := startCoordinator(t, "tok")
	follower.leader = next.addr
	w := startWorker(t, Config{Join: []string{old.addr, follower.addr}, JoinToken: "tok"})
	eventually(t, "registered with the old leader", func() bool { return old.beats("w1") >= 2 })
	// The follower still names the old leader at first, as raft followers do until the
	// election; then it names the new one.
	follower.mu.Lock()
	follower.leader = old.addr
	follower.mu.Unlock()
	old.stall()
	time.AfterFunc(300*time.Millisecond, func() {
		follower.mu.Lock()
		follower.leader = next.addr
		follower.mu.Unlock()
	})
	eventually(t, "heartbeats reach the new leader", func() bool { return next.beats("w1") >= 1 })
	// Read after the first heartbeat reached the new leader, the count can only be higher than
	// it was at that heartbeat, so the bound holds for the stalled calls before it too.
	stalled := old.stalledHeartbeats()
	t.Logf("serving the new leader after %d heartbeats hung on the old one", stalled)
	if stalled > heartbeatMisses+1 {
		t.Errorf("%d heartbeats hung on the stalled leader before the worker moved, want at most %d (heartbeatMisses+1)", stalled, heartbeatMisses+1)
	}
	if w.ID() != "w1" {
		t.Errorf("worker ID %q", w.ID())
	}
}
