package cli

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// opsCoordinator adds DeleteJob and RemoveMember to the fake: deleting an unfinished job is
// refused as the coordinator refuses it.
type opsCoordinator struct {
	*fakeCoordinator
	deleted, removed []string
}

func (f *opsCoordinator) DeleteJob(ctx context.Context, req *pb.DeleteJobRequest) (*pb.DeleteJobResponse, error) {
	if err := f.redirect(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range req.GetIds() {
		j, ok := f.jobs[id]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "job %q not found", id)
		}
		if !j.GetState().Finished() {
			return nil, status.Errorf(codes.FailedPrecondition, "job %q is %s: cancel it first", id, stateName(j.GetState()))
		}
	}
	f.deleted = append(f.deleted, req.GetIds()...)
	return &pb.DeleteJobResponse{}, nil
}

func (f *opsCoordinator) RemoveMember(ctx context.Context, req *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	if err := f.redirect(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, req.GetId())
	return &pb.RemoveMemberResponse{}, nil
}

// TestDeleteAndRemoveMember: delete and members remove reach the leader through a follower;
// an unfinished job's refusal says to cancel it.
func TestDeleteAndRemoveMember(t *testing.T) {
	var ops *opsCoordinator
	leader := startFakeAs(t, nil, func(f *fakeCoordinator) pb.CoordinatorServer {
		ops = &opsCoordinator{fakeCoordinator: f}
		return ops
	})
	follower := startFakeAs(t, &leader.addr, func(f *fakeCoordinator) pb.CoordinatorServer { return &opsCoordinator{fakeCoordinator: f} })
	leader.jobs["done"] = &pb.Job{Id: "done", State: pb.JobState_JOB_STATE_SUCCEEDED}
	leader.jobs["gone"] = &pb.Job{Id: "gone", State: pb.JobState_JOB_STATE_FAILED}
	leader.jobs["busy"] = &pb.Job{Id: "busy", State: pb.JobState_JOB_STATE_RUNNING}
	t.Setenv(tokenEnv, testToken)

	code, out, errOut := run(t, "delete", "done", "gone", "--addr", follower.addr)
	if code != 0 || out != "job done: deleted\njob gone: deleted\n" {
		t.Fatalf("delete: exit %d: %q %s", code, out, errOut)
	}
	code, _, errOut = run(t, "delete", "busy", "--addr", follower.addr)
	if code != 1 || !strings.Contains(errOut, "cancel it first") {
		t.Errorf("delete of a running job: exit %d: %s", code, errOut)
	}
	code, out, errOut = run(t, "members", "remove", "c3", "--addr", follower.addr)
	if code != 0 || out != "member c3: removed\n" {
		t.Fatalf("members remove: exit %d: %q %s", code, out, errOut)
	}
	leader.mu.Lock()
	defer leader.mu.Unlock()
	if !slices.Equal(ops.deleted, []string{"done", "gone"}) || !slices.Equal(ops.removed, []string{"c3"}) {
		t.Errorf("the leader saw deletes %v and removals %v", ops.deleted, ops.removed)
	}
}

// TestJobLimitsInTheCLI: the coordinator's JobSpec limits are checked before submitting.
func TestJobLimitsInTheCLI(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-features", "70000"}, "--max-features: 70000 is more than the limit 65536"},
		{[]string{"--max-iter", "2000000"}, "--max-iter: 2000000 is more than the limit 1048576"},
		{[]string{"--shards", "2000000000"}, "--shards"},
	} {
		code, _, errOut := run(t, append([]string{"submit", "--data", "x.csv", "--addr", deadAddr(t)}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d: %s, want %q", c.args, code, errOut, c.want)
		}
	}
}
