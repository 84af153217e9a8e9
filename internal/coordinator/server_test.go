package coordinator

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/testutil"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestServerTrainsJob: a single member with two workers trains a gl job; the stored model
// is bitwise the one the local engine trains on the same shards.
func TestServerTrainsJob(t *testing.T) {
	t.Parallel()
	s := startSingle(t, nil)
	startWorkers(t, 2, []string{s.APIAddr()}, "")
	waitWorkers(t, s.Server, 2)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)

	js := glSpec(writeCSV(t, t.TempDir(), "train.csv", 1500, 1), 8, 5)
	want := localModel(t, js)
	job, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js, Id: "gl-1"})
	if err != nil {
		t.Fatal(err)
	}
	if job.GetId() != "gl-1" || job.GetSpec().GetKernel() != "rbf" || len(job.GetSpec().GetLengthscaleBounds()) != 2 {
		t.Fatalf("submitted job %v: want the ID and the spec with defaults filled in", job)
	}
	evs, err := watch(t, c, "gl-1")
	if err != nil {
		t.Fatalf("WatchJob: %v (events %v)", err, evs)
	}
	if last := evs[len(evs)-1]; last.GetState() != pb.JobState_JOB_STATE_SUCCEEDED {
		t.Fatalf("last event %v", last)
	}
	if evs[0].GetState() != pb.JobState_JOB_STATE_PENDING || !hasPhase(evs, "optimize") {
		t.Fatalf("events do not replay the job from its submission through the optimizer: %v", evs)
	}
	job = waitState(t, c, "gl-1", pb.JobState_JOB_STATE_SUCCEEDED, 30*time.Second)
	got, err := s.node.Model("gl-1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the cluster's model (%d bytes) differs from the local engine's (%d bytes)", len(got), len(want))
	}
	if !bytes.Equal(fetchModel(t, c, "gl-1"), want) {
		t.Fatal("GetModel returned other bytes")
	}
	h := job.GetHyperparameters()
	if job.GetNTrain() != 1500 || len(h.GetLengthscales()) != 2 || h.GetNoiseVariance() <= 0 || job.GetIteration() == 0 ||
		job.GetModelBytes() != int64(len(want)) || job.GetTrainSeconds() <= 0 {
		t.Fatalf("job message lacks the training results: %v", job)
	}

	// A watch of a finished job replays it and ends.
	if again, err := watch(t, c, "gl-1"); err != nil || again[len(again)-1].GetState() != pb.JobState_JOB_STATE_SUCCEEDED {
		t.Fatalf("watch after the end: %v, %v", again, err)
	}

	// Predict: the model's own predictions; bad shapes are InvalidArgument.
	x := []float64{1, 2, 3, 4, 5, 0.5}
	p, err := c.Predict(ctx, &pb.PredictRequest{JobId: "gl-1", D: 2, X: x})
	if err != nil || len(p.GetMean()) != 3 || len(p.GetNoisyVar()) != 3 || p.GetNoisyVar()[0] <= p.GetLatentVar()[0] {
		t.Fatalf("Predict: %v, %v", p, err)
	}
	for _, bad := range []*pb.PredictRequest{
		{JobId: "gl-1", D: 3, X: x}, {JobId: "gl-1", D: 2}, {JobId: "gl-1", D: 2, X: x[:3]}, {JobId: "gl-1", D: 0, X: x},
	} {
		if _, err := c.Predict(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Predict(d=%d, %d values): %v, want InvalidArgument", bad.GetD(), len(bad.GetX()), err)
		}
	}
	if _, err := c.Predict(ctx, &pb.PredictRequest{JobId: "nope", D: 2, X: x}); status.Code(err) != codes.NotFound {
		t.Errorf("Predict on an unknown job: %v", err)
	}

	// Listing, duplicates, workers, metrics.
	if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js, Id: "gl-1"}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate ID: %v", err)
	}
	list, err := c.ListJobs(ctx, &pb.ListJobsRequest{})
	if err != nil || len(list.GetJobs()) != 1 {
		t.Fatalf("ListJobs: %v, %v", list, err)
	}
	ws, err := c.ListWorkers(ctx, &pb.ListWorkersRequest{})
	if err != nil || len(ws.GetWorkers()) != 2 {
		t.Fatalf("ListWorkers: %v, %v", ws, err)
	}
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`gpreduce_jobs{state="succeeded"} 1`, `gpreduce_live_workers 2`, `gpreduce_raft_state{state="leader"} 1`,
		`gpreduce_tasks_total{result="ok"}`, `gpreduce_checkpoints_total{outcome="saved"}`, "gpreduce_rounds_total", "gpreduce_task_duration_seconds_bucket", "gpreduce_raft_term "} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func hasPhase(evs []*pb.JobEvent, phase string) bool {
	for _, ev := range evs {
		if ev.GetPhase() == phase {
			return true
		}
	}
	return false
}

// TestServerCancel: a running job (waiting for workers here) is canceled, its run stops,
// and canceling again is refused.
func TestServerCancel(t *testing.T) {
	t.Parallel()
	s := startSingle(t, nil)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)
	js := glSpec(writeCSV(t, t.TempDir(), "d.csv", 200, 2), 4, 2)
	job, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js})
	if err != nil {
		t.Fatal(err)
	}
	id := job.GetId()
	if !strings.HasPrefix(id, "job-") {
		t.Fatalf("generated ID %q", id)
	}
	waitState(t, c, id, pb.JobState_JOB_STATE_RUNNING, 10*time.Second)
	done := make(chan []*pb.JobEvent)
	go func() {
		evs, _ := watch(t, c, id)
		done <- evs
	}()
	got, err := c.CancelJob(ctx, &pb.CancelJobRequest{Id: id})
	if err != nil || got.GetState() != pb.JobState_JOB_STATE_CANCELED {
		t.Fatalf("CancelJob: %v, %v", got, err)
	}
	select {
	case evs := <-done:
		if len(evs) == 0 || evs[len(evs)-1].GetState() != pb.JobState_JOB_STATE_CANCELED {
			t.Fatalf("watch ended with %v", evs)
		}
	case <-time.After(testutil.MinWait): // only bounds a hang
		t.Fatal("the watch did not end with the cancellation")
	}
	eventually(t, 10*time.Second, "the run stops", func() error {
		s.runner.mu.Lock()
		defer s.runner.mu.Unlock()
		if n := len(s.runner.term.jobs); n != 0 {
			return fmt.Errorf("%d runs", n)
		}
		return nil
	})
	if _, err := c.CancelJob(ctx, &pb.CancelJobRequest{Id: id}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second cancel: %v, want FailedPrecondition", err)
	}
	if j, _ := c.GetJob(ctx, &pb.GetJobRequest{Id: id}); j.GetState() != pb.JobState_JOB_STATE_CANCELED {
		t.Fatalf("job after the cancel: %v", j)
	}
	if _, err := c.CancelJob(ctx, &pb.CancelJobRequest{Id: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("cancel unknown: %v", err)
	}
}

// TestServerJobFailures: jobs over a missing file and over a file with a bad row fail with
// messages naming the file (and the row), while a job running at the same time succeeds.
func TestServerJobFailures(t *testing.T) {
	t.Parallel()
	s := startSingle(t, nil)
	startWorkers(t, 2, []string{s.APIAddr()}, "")
	waitWorkers(t, s.Server, 2)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)
	dir := t.TempDir()

	good := glSpec(writeCSV(t, dir, "good.csv", 1500, 3), 8, 4)
	missing := glSpec(filepath.Join(dir, "missing.csv"), 8, 4)
	badPath := writeCSV(t, dir, "bad.csv", 600, 4)
	raw, _ := os.ReadFile(badPath)
	lines := strings.Split(string(raw), "\n")
	lines[456] = "1.5,oops,2" // line 457 of the file
	if err := os.WriteFile(badPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := glSpec(badPath, 8, 3)

	for id, js := range map[string]*pb.JobSpec{"good": good, "missing": missing, "bad": bad} {
		if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js, Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"missing", []string{filepath.Join(dir, "missing.csv")}},
		{"bad", []string{badPath + ":457:2", "(4 bytes, with letters) is not a number"}},
	} {
		j := waitState(t, c, tc.id, pb.JobState_JOB_STATE_FAILED, 30*time.Second)
		for _, w := range tc.want {
			if !strings.Contains(j.GetError(), w) {
				t.Errorf("job %s failed with %q, which does not name %q", tc.id, j.GetError(), w)
			}
		}
	}
	waitState(t, c, "good", pb.JobState_JOB_STATE_SUCCEEDED, 30*time.Second)
	if m, _ := s.node.Model("good"); !bytes.Equal(m, localModel(t, good)) {
		t.Fatal("the good job's model differs from the local engine's")
	}
}

// TestSubmitValidation: bad specs are refused up front with InvalidArgument naming the field.
func TestSubmitValidation(t *testing.T) {
	t.Parallel()
	s := startSingle(t, nil)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)
	data := &pb.DataSource{Uri: "x.csv"}
	for _, tc := range []struct {
		req  *pb.SubmitJobRequest
		want string
	}{
		{&pb.SubmitJobRequest{Spec: &pb.JobSpec{Method: "svm", Data: data}}, "spec.method"},
		{&pb.SubmitJobRequest{Spec: &pb.JobSpec{Method: "gl"}}, "spec.data.uri"},
		{&pb.SubmitJobRequest{Spec: &pb.JobSpec{Method: "gl", Data: data, LengthscaleBounds: []float64{2, 1}}}, "spec.lengthscale_bounds"},
		{&pb.SubmitJobRequest{Spec: &pb.JobSpec{Method: "gl", Data: data}, Id: "bad id"}, "id:"},
		{&pb.SubmitJobRequest{}, "spec:"},
	} {
		_, err := c.SubmitJob(ctx, tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
			t.Errorf("SubmitJob(%v): %v, want InvalidArgument naming %s", tc.req, err, tc.want)
		}
	}
	if list, _ := c.ListJobs(ctx, &pb.ListJobsRequest{}); len(list.GetJobs()) != 0 {
		t.Fatalf("refused jobs were stored: %v", list)
	}
}

// TestServerAuth: with tokens configured, calls without the right token are Unauthenticated;
// workers need the join token, clients the API token.
func TestServerAuth(t *testing.T) {
	t.Parallel()
	const token, joinToken = "api-secret", "join-secret"
	s := startSingle(t, func(cfg *ServerConfig) { cfg.Token, cfg.JoinToken = token, joinToken })
	ctx := testContext(t)
	reg := &pb.RegisterWorkerRequest{Address: "127.0.0.1:1", Name: "w"}
	for _, tc := range []struct {
		name, token string
		list, join  codes.Code
	}{
		{"no token", "", codes.Unauthenticated, codes.Unauthenticated},
		{"wrong token", "guess", codes.Unauthenticated, codes.Unauthenticated},
		{"API token", token, codes.OK, codes.Unauthenticated},
		{"join token", joinToken, codes.Unauthenticated, codes.OK},
	} {
		c := dial(t, s.APIAddr(), tc.token)
		_, err := c.ListJobs(ctx, &pb.ListJobsRequest{})
		if status.Code(err) != tc.list {
			t.Errorf("%s: ListJobs: %v, want %v", tc.name, err, tc.list)
		}
		_, err = c.RegisterWorker(ctx, reg)
		if status.Code(err) != tc.join {
			t.Errorf("%s: RegisterWorker: %v, want %v", tc.name, err, tc.join)
		}
		// Streams are guarded too.
		stream, err := c.GetModel(ctx, &pb.GetModelRequest{JobId: "x"})
		if err == nil {
			_, err = stream.Recv()
		}
		if wantStream := tc.list; wantStream == codes.OK {
			if status.Code(err) != codes.NotFound {
				t.Errorf("%s: GetModel: %v, want NotFound", tc.name, err)
			}
		} else if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: GetModel: %v, want Unauthenticated", tc.name, err)
		}
	}
}

// TestClusterRedirect: followers refuse leader calls with the leader's API address in the
// trailer and serve reads from their own state; members know each other's API addresses.
func TestClusterRedirect(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3, nil)
	leader := leaderOf(t, servers)
	ctx := testContext(t)
	lc := dial(t, leader.APIAddr(), "")
	js := glSpec(filepath.Join(t.TempDir(), "none.csv"), 4, 1)
	if _, err := lc.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js, Id: "j"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range servers {
		if f == leader {
			continue
		}
		c := dial(t, f.APIAddr(), "")
		var trailer metadata.MD
		_, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js}, grpc.Trailer(&trailer))
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), leader.APIAddr()) {
			t.Fatalf("SubmitJob on follower %s: %v", f.node.ID(), err)
		}
		if got := trailer.Get(LeaderTrailer); len(got) != 1 || got[0] != leader.APIAddr() {
			t.Fatalf("follower trailer %v, want %s", trailer, leader.APIAddr())
		}
		// Streams redirect too.
		stream, err := c.WatchJob(ctx, &pb.WatchJobRequest{Id: "j"})
		if err == nil {
			_, err = stream.Recv()
		}
		if got := stream.Trailer().Get(LeaderTrailer); status.Code(err) != codes.FailedPrecondition || len(got) != 1 || got[0] != leader.APIAddr() {
			t.Fatalf("WatchJob on follower: %v, trailer %v", err, stream.Trailer())
		}
		if _, err := c.RegisterWorker(ctx, &pb.RegisterWorkerRequest{Address: "127.0.0.1:1"}); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("RegisterWorker on follower: %v", err)
		}
		eventually(t, 10*time.Second, "the follower reads the job", func() error {
			_, err := c.GetJob(ctx, &pb.GetJobRequest{Id: "j"})
			return err
		})
		members, err := c.ListMembers(ctx, &pb.ListMembersRequest{})
		if err != nil || len(members.GetMembers()) != 3 {
			t.Fatalf("ListMembers: %v, %v", members, err)
		}
		for _, m := range members.GetMembers() {
			var want string
			for _, s := range servers {
				if s.node.ID() == m.GetId() {
					want = s.APIAddr()
				}
			}
			if m.GetApiAddress() != want || m.GetLeader() != (m.GetId() == leader.node.ID()) {
				t.Fatalf("member %v, want API address %s", m, want)
			}
		}
	}

	// Removing a member drops it and its API address for good: it does not add itself back.
	var gone *runningServer
	for _, s := range servers {
		if s != leader {
			gone = s
		}
	}
	if _, err := dial(t, gone.APIAddr(), "").RemoveMember(ctx, &pb.RemoveMemberRequest{Id: gone.node.ID()}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("RemoveMember on a follower: %v", err)
	}
	proved := withMemberProof(ctx, []byte(testRaftSecret), "RemoveMember", gone.node.ID(), "", "")
	if _, err := lc.RemoveMember(proved, &pb.RemoveMemberRequest{Id: gone.node.ID()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(memberSyncInterval + 200*time.Millisecond)
	members, err := lc.ListMembers(ctx, &pb.ListMembersRequest{})
	if err != nil || len(members.GetMembers()) != 2 {
		t.Fatalf("ListMembers after the removal: %v, %v", members, err)
	}
	if _, ok := leader.node.MemberAPIs()[gone.node.ID()]; ok {
		t.Fatalf("the removed member's API address is still recorded: %v", leader.node.MemberAPIs())
	}
}

// TestClusterFailover: the leader closes while a job is optimizing; the new leader resumes it
// from its checkpoint and the final model equals the undisturbed one bit for bit.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3, func(cfg *ServerConfig) { cfg.CheckpointInterval = time.Nanosecond })
	var apis []string
	for _, s := range servers {
		apis = append(apis, s.APIAddr())
	}
	startWorkers(t, 2, apis, "")
	leader := leaderOf(t, servers)
	waitWorkers(t, leader.Server, 2)
	ctx := testContext(t)

	js := glSpec(writeCSV(t, t.TempDir(), "d.csv", 2000, 5), 12, 4)
	want := localModel(t, js)
	if _, err := dial(t, leader.APIAddr(), "").SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js, Id: "f"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the job optimizes", func() error {
		j, err := leader.node.Job("f")
		if err != nil || j.Iteration < 2 {
			return fmt.Errorf("iteration %d, %v", j.Iteration, err)
		}
		return nil
	})
	if err := leader.close(); err != nil {
		t.Fatal(err)
	}
	var rest []*runningServer
	for _, s := range servers {
		if s != leader {
			rest = append(rest, s)
		}
	}
	next := leaderOf(t, rest)
	c := dial(t, next.APIAddr(), "")
	evs, err := watch(t, c, "f")
	if err != nil {
		t.Fatalf("watch on the new leader: %v", err)
	}
	resumed := false
	for _, ev := range evs {
		resumed = resumed || (strings.HasPrefix(ev.GetMessage(), "resumed by") && !strings.Contains(ev.GetMessage(), "iteration 0"))
	}
	if !resumed {
		t.Fatalf("the new leader did not resume from an optimizer checkpoint: %v", evs)
	}
	waitState(t, c, "f", pb.JobState_JOB_STATE_SUCCEEDED, 30*time.Second)
	for _, s := range rest {
		eventually(t, 10*time.Second, "the model reaches "+s.node.ID(), func() error {
			got, err := s.node.Model("f")
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: the model after failover differs from the undisturbed one", s.node.ID())
			}
			return nil
		})
	}
}

func TestAdvertiseAPI(t *testing.T) {
	for _, tc := range []struct{ adv, listen, raft, want string }{
		{"api.example:9000", "0.0.0.0:9000", "10.0.0.1:7000", "api.example:9000"},
		{"", "127.0.0.1:9000", "10.0.0.1:7000", "127.0.0.1:9000"},
		{"", "0.0.0.0:9000", "10.0.0.1:7000", "10.0.0.1:9000"},
		{"", "[::]:9000", "[fd00::1]:7000", "[fd00::1]:9000"},
	} {
		if got := advertiseAPI(tc.adv, tc.listen, tc.raft); got != tc.want {
			t.Errorf("advertiseAPI(%q, %q, %q) = %q, want %q", tc.adv, tc.listen, tc.raft, got, tc.want)
		}
	}
	if got := advertiseAPI("", "0.0.0.0:9000", "0.0.0.0:7000"); strings.HasPrefix(got, "0.0.0.0") {
		t.Errorf("an unspecified host was advertised: %s", got)
	}
}
