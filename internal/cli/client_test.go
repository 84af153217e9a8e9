package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/testutil"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

const testToken = "s3cret"

// fakeCoordinator is a scripted Coordinator API. A follower answers every call with
// FAILED_PRECONDITION and the leader's address in the gpreduce-leader trailer ("" while no
// leader is known); a leader serves a small in-memory job table.
type fakeCoordinator struct {
	pb.UnimplementedCoordinatorServer
	addr string
	srv  *grpc.Server

	mu       sync.Mutex
	leader   *string // for a follower: the leader's address to name; nil on the leader
	jobs     map[string]*pb.Job
	events   []*pb.JobEvent
	breakAt  int // WatchJob: the first stream breaks (Unavailable) after this many events
	watches  int
	submits  []*pb.SubmitJobRequest
	predicts int
	// domain > 0 makes Predict flag rows whose sum of inputs exceeds it as outside the
	// model's domain, as a gl model's coordinator does.
	domain float64
	// extrapolate > 0 makes Predict flag rows whose sum of inputs exceeds it as beyond the
	// training inputs' range, as the coordinator of a model with a training box does.
	extrapolate float64
}

func startFake(t *testing.T, leader *string) *fakeCoordinator { return startFakeAs(t, leader, nil) }

// startFakeAs starts a fake whose gRPC service is as(f) (f itself if as is nil), for fakes
// that add methods.
func startFakeAs(t *testing.T, leader *string, as func(*fakeCoordinator) pb.CoordinatorServer) *fakeCoordinator {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCoordinator{addr: lis.Addr().String(), leader: leader, jobs: map[string]*pb.Job{}}
	log := zerolog.Nop()
	f.srv = grpc.NewServer(
		grpc.UnaryInterceptor(auth.UnaryServerInterceptor(auth.Static(testToken), log)),
		grpc.StreamInterceptor(auth.StreamServerInterceptor(auth.Static(testToken), log)))
	var svc pb.CoordinatorServer = f
	if as != nil {
		svc = as(f)
	}
	pb.RegisterCoordinatorServer(f.srv, svc)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
	return f
}

// redirect answers as a follower would, if this is one.
func (f *fakeCoordinator) redirect(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leader == nil {
		return nil
	}
	if *f.leader == "" {
		return status.Error(codes.Unavailable, "not the leader, and no leader is known yet (election in progress); retry shortly")
	}
	grpc.SetTrailer(ctx, metadata.Pairs(leaderTrailer, *f.leader))
	return status.Error(codes.FailedPrecondition, "not the leader")
}

func (f *fakeCoordinator) SubmitJob(ctx context.Context, req *pb.SubmitJobRequest) (*pb.Job, error) {
	if err := f.redirect(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submits = append(f.submits, req)
	id := req.GetId()
	if id == "" {
		id = "j-1"
	}
	j := &pb.Job{Id: id, Spec: req.GetSpec(), State: pb.JobState_JOB_STATE_PENDING}
	f.jobs[id] = j
	return j, nil
}

func (f *fakeCoordinator) GetJob(ctx context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	if err := f.redirect(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[req.GetId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "job %q not found", req.GetId())
	}
	return proto.Clone(j).(*pb.Job), nil
}

func (f *fakeCoordinator) ListMembers(ctx context.Context, _ *pb.ListMembersRequest) (*pb.ListMembersResponse, error) {
	if err := f.redirect(ctx); err != nil {
		return nil, err
	}
	return &pb.ListMembersResponse{Members: []*pb.Member{{Id: "c1", RaftAddress: "127.0.0.1:7000", ApiAddress: f.addr, Leader: true}}}, nil
}

func (f *fakeCoordinator) Predict(ctx context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error) {
	if err := f.redirect(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.predicts++
	f.mu.Unlock()
	n := len(req.GetX()) / int(req.GetD())
	r := &pb.PredictResponse{}
	for i := 0; i < n; i++ {
		s := 0.0
		for k := 0; k < int(req.GetD()); k++ {
			s += req.GetX()[i*int(req.GetD())+k]
		}
		r.Mean = append(r.Mean, s)
		r.LatentVar = append(r.LatentVar, 0.5)
		r.NoisyVar = append(r.NoisyVar, 1.5)
		if f.domain > 0 {
			r.OutsideDomain = append(r.OutsideDomain, s > f.domain)
		}
		if f.extrapolate > 0 {
			r.Extrapolated = append(r.Extrapolated, s > f.extrapolate)
		}
	}
	return r, nil
}

// WatchJob sends the scripted events; the first stream breaks after breakAt events. When the
// last event is sent the job is finished.
func (f *fakeCoordinator) WatchJob(req *pb.WatchJobRequest, st grpc.ServerStreamingServer[pb.JobEvent]) error {
	if err := f.redirect(st.Context()); err != nil {
		return err
	}
	f.mu.Lock()
	f.watches++
	first := f.watches == 1
	evs := f.events
	f.mu.Unlock()
	for i, ev := range evs {
		if first && f.breakAt > 0 && i == f.breakAt {
			return status.Error(codes.Unavailable, "leadership lost")
		}
		if err := st.Send(ev); err != nil {
			return err
		}
	}
	f.mu.Lock()
	last := evs[len(evs)-1]
	j := f.jobs[req.GetId()]
	j.State, j.Iteration, j.Objective = last.GetState(), last.GetIteration(), last.GetObjective()
	if j.State == pb.JobState_JOB_STATE_FAILED {
		j.Error = last.GetMessage()
	}
	f.mu.Unlock()
	return nil
}

// TestClientFollowsLeader: a call given only a follower's address reaches the leader.
func TestClientFollowsLeader(t *testing.T) {
	leader := startFake(t, nil)
	follower := startFake(t, &leader.addr)
	leader.jobs["j-7"] = &pb.Job{Id: "j-7", State: pb.JobState_JOB_STATE_SUCCEEDED, Iteration: 12, Objective: -1.25,
		Spec: &pb.JobSpec{Method: "gl", Kernel: "rbf", MaxIter: 100, Data: &pb.DataSource{Uri: "/d.csv"}},
		Metrics: &pb.JobMetrics{Hyperparameters: &pb.Hyperparameters{Lengthscales: []float64{0.5}, SignalVariance: 2, NoiseVariance: 0.01},
			NTrain: 400, ModelBytes: 1234}}
	code, out, errOut := run(t, "status", "j-7", "--json", "--addr", follower.addr, "--token", testToken)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r["state"] != "succeeded" || r["iteration"].(float64) != 12 || r["objective"].(float64) != -1.25 {
		t.Errorf("status: %v", r)
	}
	if h, ok := r["hyperparameters"].(map[string]any); !ok || h["noise_variance"].(float64) != 0.01 {
		t.Errorf("hyperparameters: %v", r["hyperparameters"])
	}
	if m, ok := r["metrics"].(map[string]any); !ok || m["n_train"].(float64) != 400 {
		t.Errorf("metrics: %v", r["metrics"])
	}
	// The token can come from the environment; text output names the state.
	t.Setenv(tokenEnv, testToken)
	code, out, errOut = run(t, "status", "j-7", "--addr", follower.addr)
	if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, "lengthscale 0.5") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	code, _, errOut = run(t, "status", "j-8", "--addr", follower.addr)
	if code != ExitNotFound || !strings.Contains(errOut, `job "j-8" not found`) {
		t.Errorf("missing job: exit %d: %s", code, errOut)
	}
}

// TestClientErrors: a wrong or missing token, unreachable addresses, and a cluster without a
// leader give errors that say so.
func TestClientErrors(t *testing.T) {
	leader := startFake(t, nil)
	t.Setenv(tokenEnv, "")
	for _, tok := range []string{"", "wrong"} {
		code, _, errOut := run(t, "status", "x", "--addr", leader.addr, "--token", tok)
		if code != ExitAuth || !strings.Contains(errOut, "the coordinator rejected the token: pass --token or set GPREDUCE_TOKEN") {
			t.Errorf("token %q: exit %d: %s", tok, code, errOut)
		}
	}
	dead := deadAddr(t)
	code, _, errOut := run(t, "status", "x", "--addr", dead, "--token", testToken)
	if code != ExitUnreachable || !strings.Contains(errOut, "cannot reach a coordinator at "+dead) || !strings.Contains(errOut, "connection refused") {
		t.Errorf("unreachable: exit %d: %s", code, errOut)
	}
	// A dead first address is skipped.
	leader.jobs["x"] = &pb.Job{Id: "x", State: pb.JobState_JOB_STATE_RUNNING}
	code, out, errOut := run(t, "status", "x", "--addr", dead+","+leader.addr, "--token", testToken)
	if code != 0 || !strings.Contains(out, "running") {
		t.Errorf("dead then live: exit %d: %s %s", code, out, errOut)
	}
	// No leader: waits --leader-wait, then says so.
	none := ""
	orphan := startFake(t, &none)
	t0 := time.Now()
	code, _, errOut = run(t, "status", "x", "--addr", orphan.addr, "--token", testToken, "--leader-wait", "600ms")
	if code != ExitUnreachable || !strings.Contains(errOut, "no leader") {
		t.Errorf("no leader: exit %d: %s", code, errOut)
	}
	if d := time.Since(t0); d < 500*time.Millisecond || d > 10*time.Second {
		t.Errorf("no leader: gave up after %s, want about 600ms", d)
	}
}

// TestClientWaitsForElection: a follower that learns of a leader while the client waits.
func TestClientWaitsForElection(t *testing.T) {
	leader := startFake(t, nil)
	leader.jobs["x"] = &pb.Job{Id: "x", State: pb.JobState_JOB_STATE_PENDING}
	none := ""
	follower := startFake(t, &none)
	go func() {
		time.Sleep(300 * time.Millisecond)
		follower.mu.Lock()
		follower.leader = &leader.addr
		follower.mu.Unlock()
	}()
	code, out, errOut := run(t, "status", "x", "--addr", follower.addr, "--token", testToken)
	if code != 0 || !strings.Contains(out, "pending") {
		t.Errorf("exit %d: %s %s", code, out, errOut)
	}
}

func deadAddr(t *testing.T) string { return testutil.FreeAddr(t) }

func optEvent(it int32, obj float64) *pb.JobEvent {
	return &pb.JobEvent{JobId: "j-1", State: pb.JobState_JOB_STATE_RUNNING, Phase: "optimize", Iteration: it, MaxIter: 20, Objective: obj, UnixNano: int64(it) + 1e18}
}

// TestSubmitWait: submit --wait from flags streams JSON events (resuming a broken stream
// without repeating events), prints the final status and the job's exit code.
func TestSubmitWait(t *testing.T) {
	leader := startFake(t, nil)
	leader.breakAt = 2
	leader.events = []*pb.JobEvent{
		{JobId: "j-1", State: pb.JobState_JOB_STATE_RUNNING, Phase: "moments", Message: "standardization pass", UnixNano: 1e18},
		optEvent(1, -0.5), optEvent(2, -0.75),
		{JobId: "j-1", State: pb.JobState_JOB_STATE_SUCCEEDED, UnixNano: 2e18},
	}
	follower := startFake(t, &leader.addr)
	dir := t.TempDir()
	code, out, errOut := run(t, "submit", "--method", "gl", "--data", "train.csv", "--header", "--target", "y", "--columns", "a,b",
		"--nodes-per-dim", "10,12", "--lengthscale-bounds", "0.2,1", "--shards", "3", "--wait",
		"--addr", follower.addr+","+leader.addr, "--token", testToken)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "j-1" || !strings.Contains(out, "state       succeeded") {
		t.Errorf("stdout:\n%s", out)
	}
	var evs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", l, err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 4 || evs[1]["iteration"].(float64) != 1 || evs[3]["state"] != "succeeded" {
		t.Errorf("events (want 4, each once): %v", evs)
	}
	if leader.watches != 2 {
		t.Errorf("%d watch streams, want 2 (one broken, one resumed)", leader.watches)
	}
	wd, _ := os.Getwd()
	want := &pb.JobSpec{Method: "gl", Kernel: "rbf", LengthscaleBounds: []float64{0.2, 1}, SignalVarianceBounds: []float64{0.05, 20},
		NoiseVarianceBounds: []float64{1e-4, 2}, MaxIter: 100, Settings: &pb.JobSpec_Gl{Gl: &pb.GLSettings{NodesPerDim: []int32{10, 12}}},
		Data:   &pb.DataSource{Uri: filepath.Join(wd, "train.csv"), Format: "csv", Header: true, Target: "y", Columns: []string{"a", "b"}},
		Shards: 3}
	if len(leader.submits) != 1 || !proto.Equal(leader.submits[0].GetSpec(), want) {
		t.Errorf("submitted %v\nwant %v", leader.submits, want)
	}

	// A failed job: exit 1 with its error; JSON output.
	leader.mu.Lock()
	leader.watches, leader.breakAt = 0, 0
	leader.events = []*pb.JobEvent{{JobId: "j-1", State: pb.JobState_JOB_STATE_FAILED, Message: "load shard 1: /x.csv:7:2: \"abc\" is not a number", UnixNano: 3e18}}
	leader.mu.Unlock()
	job := filepath.Join(dir, "job.yaml")
	os.WriteFile(job, []byte("data: {uri: /x.csv}\n"), 0o644)
	code, out, errOut = run(t, "submit", job, "--wait", "--json", "--addr", leader.addr, "--token", testToken)
	if code != 1 || !strings.Contains(errOut, "job j-1 failed: load shard 1: /x.csv:7:2") {
		t.Errorf("failed job: exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil || r["state"] != "failed" {
		t.Errorf("failed job: stdout %q (%v)", out, err)
	}
	// A job file and job flags do not mix.
	code, _, errOut = run(t, "submit", job, "--shards", "2", "--addr", leader.addr)
	if code != ExitUsage || !strings.Contains(errOut, "--shards cannot be combined with a job file") {
		t.Errorf("file and flags: exit %d: %s", code, errOut)
	}
	// A bad job file is refused before any call.
	os.WriteFile(job, []byte("data: {uri: /x.csv}\nnoise_variance_bounds: [1, 0.1]\n"), 0o644)
	code, _, errOut = run(t, "submit", job, "--addr", deadAddr(t))
	if code != 1 || !strings.Contains(errOut, job) || !strings.Contains(errOut, "noise_variance_bounds") {
		t.Errorf("bad job file: exit %d: %s", code, errOut)
	}
}

// TestPredictJob: predict --job sends the CSV's rows in batches and writes the same CSV as
// the local predict; --model still works locally and one of the two is required.
func TestPredictJob(t *testing.T) {
	leader := startFake(t, nil)
	leader.jobs["j-2"] = &pb.Job{Id: "j-2", State: pb.JobState_JOB_STATE_SUCCEEDED,
		Spec: &pb.JobSpec{Data: &pb.DataSource{Uri: "/t.csv", Header: true, Target: "y"}}}
	dir := t.TempDir()
	in := filepath.Join(dir, "x.csv")
	var b strings.Builder
	b.WriteString("a,y,b\n")
	n := predictValuesPerCall/2 + 10 // two calls with d = 2
	for i := 0; i < n; i++ {
		b.WriteString("1,9,2\n")
	}
	os.WriteFile(in, []byte(b.String()), 0o644)
	out := filepath.Join(dir, "p.csv")
	code, _, errOut := run(t, "predict", "--job", "j-2", "--data", in, "--header", "--out", out, "--addr", leader.addr, "--token", testToken)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != n+1 || lines[0] != "mean,latent_var,noisy_var" || lines[1] != "3,0.5,1.5" {
		t.Errorf("%d lines; first %q %q", len(lines), lines[0], lines[1])
	}
	if leader.predicts != 2 {
		t.Errorf("%d Predict calls, want 2", leader.predicts)
	}
	code, _, errOut = run(t, "predict", "--data", in, "--out", out)
	if code != ExitUsage || !strings.Contains(errOut, "--model") || !strings.Contains(errOut, "--job") {
		t.Errorf("neither: exit %d: %s", code, errOut)
	}
}

// TestPredictJobOutsideDomain: with a model that has a domain and a training box, predict
// --job writes the outside_domain and extrapolated columns across batches and counts the
// flagged rows on stderr.
func TestPredictJobOutsideDomain(t *testing.T) {
	leader := startFake(t, nil)
	leader.domain = 5
	leader.extrapolate = 2
	leader.jobs["j-3"] = &pb.Job{Id: "j-3", State: pb.JobState_JOB_STATE_SUCCEEDED, Spec: &pb.JobSpec{Data: &pb.DataSource{Uri: "/t.csv"}}}
	dir := t.TempDir()
	in := filepath.Join(dir, "x.csv")
	var b strings.Builder
	n := predictValuesPerCall/2 + 10 // two calls with d = 2
	for i := 0; i < n; i++ {
		if i%3 == 0 {
			b.WriteString("10,2\n")
		} else {
			b.WriteString("1,2\n")
		}
	}
	os.WriteFile(in, []byte(b.String()), 0o644)
	out := filepath.Join(dir, "p.csv")
	code, _, errOut := run(t, "predict", "--job", "j-3", "--data", in, "--out", out, "--addr", leader.addr, "--token", testToken)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != n+1 || lines[0] != "mean,latent_var,noisy_var,outside_domain,extrapolated" {
		t.Fatalf("%d lines; header %q", len(lines), lines[0])
	}
	flagged := 0
	for i, l := range lines[1:] {
		want := "3,0.5,1.5,0,1" // inside the domain, beyond the training range
		if i%3 == 0 {
			want = "12,0.5,1.5,1,1"
			flagged++
		}
		if l != want {
			t.Fatalf("row %d: %q, want %q", i, l, want)
		}
	}
	if !strings.Contains(errOut, fmt.Sprintf("%d of %d rows lie outside the domain of job j-3", flagged, n)) ||
		!strings.Contains(errOut, fmt.Sprintf("%d of %d rows lie beyond the training inputs' range of job j-3", n, n)) {
		t.Errorf("stderr: %q", errOut)
	}
}
