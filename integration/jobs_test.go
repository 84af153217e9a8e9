package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/testutil"
)

// A job is the flags of one training job, in the forms submit and eval take.
type job struct {
	spec   []string // method flags, the same for submit and eval
	submit []string // data flags of submit
	eval   []string // data flags of eval
}

func (j job) submitArgs(extra ...string) []string {
	return append(append(append([]string{}, j.spec...), j.submit...), extra...)
}

// gl2d: Gauss-Legendre features (30 x 30 nodes, 900 features) on the generated 2-input data
// in 6 row-range shards; it runs a few seconds, most of them in the optimizer.
func gl2d() job {
	return job{
		spec:   []string{"--method", "gl", "--lengthscale-bounds", "0.3,2", "--nodes-per-dim", "30,30", "--max-iter", "60"},
		submit: []string{"--data", data.train2d, "--header", "--target", "y", "--columns", "a,b", "--shards", "6"},
		eval:   []string{"--train", data.train2d, "--test", data.test2d, "--header", "--target", "y", "--columns", "a,b", "--shards", "6"},
	}
}

// rff2d: random Fourier features on the same data; every objective evaluation is a round of
// map tasks over the workers.
func rff2d() job {
	j := gl2d()
	j.spec = []string{"--method", "rff", "--features", "256", "--lengthscale-bounds", "0.2,2", "--max-iter", "40", "--seed", "7"}
	return j
}

// yacht: Gauss-Legendre features on UCI yacht, split 0 (278 training rows, 6 inputs, so 3
// nodes per input: 729 features), in 4 shards.
func yacht(t *testing.T) job {
	dir := filepath.Join(testutil.SharedData(t), "uci", "yacht")
	return job{
		spec:   []string{"--method", "gl", "--lengthscale-bounds", "0.5,2", "--nodes-per-dim", "3,3,3,3,3,3", "--max-iter", "40"},
		submit: []string{"--data", dir, "--format", "uci", "--split", "0", "--shards", "4"},
		eval:   []string{"--uci", dir, "--split", "0", "--shards", "4"},
	}
}

var localModels = struct {
	sync.Mutex
	m map[string][]byte
}{m: map[string][]byte{}}

// local returns the model eval trains for j with the in-process engine (computed once).
func (j job) local(t *testing.T) []byte {
	t.Helper()
	args := append(append([]string{}, j.spec...), j.eval...)
	key := strings.Join(args, " ")
	localModels.Lock()
	defer localModels.Unlock()
	if b, ok := localModels.m[key]; ok {
		return b
	}
	b := localModel(t, args...)
	localModels.m[key] = b
	return b
}

// sameModel checks that the cluster's model is byte for byte the one eval trained, and if
// not, says what differs.
func sameModel(t *testing.T, what string, cluster, local []byte) {
	t.Helper()
	if bytes.Equal(cluster, local) {
		return
	}
	mc, errC := model.Decode(bytes.NewReader(cluster))
	ml, errL := model.Decode(bytes.NewReader(local))
	if errC != nil || errL != nil {
		t.Errorf("%s: the models differ (%d and %d bytes) and do not decode: %v; %v", what, len(cluster), len(local), errC, errL)
		return
	}
	var diffs []string
	if !reflect.DeepEqual(mc.Columns, ml.Columns) || mc.Target != ml.Target {
		diffs = append(diffs, fmt.Sprintf("names: cluster %q -> %q, eval %q -> %q", mc.Columns, mc.Target, ml.Columns, ml.Target))
	}
	if !reflect.DeepEqual(mc.Hyper, ml.Hyper) {
		diffs = append(diffs, fmt.Sprintf("hyperparameters: cluster %+v, eval %+v", mc.Hyper, ml.Hyper))
	}
	if mc.Iterations != ml.Iterations || mc.LogLik != ml.LogLik {
		diffs = append(diffs, fmt.Sprintf("fit: cluster %d iterations, log p %v; eval %d, %v", mc.Iterations, mc.LogLik, ml.Iterations, ml.LogLik))
	}
	if !reflect.DeepEqual(mc.Transform, ml.Transform) {
		diffs = append(diffs, "standardization")
	}
	rc, _ := mc.Bytes()
	rl, _ := ml.Bytes()
	if len(diffs) == 0 && bytes.Equal(rc, rl) {
		diffs = append(diffs, "the decoded models are equal, but their encodings differ")
	}
	t.Errorf("%s: the cluster's model (%d bytes) differs from eval's (%d bytes): %s", what, len(cluster), len(local), strings.Join(diffs, "; "))
}

// TestClusterMatchesLocalEngine: 3 coordinators and 3 workers train two jobs at once, gl on a
// UCI split and gl on a CSV; each model is bitwise the one `coordinator eval` trains with
// the in-process engine on the same shards. The job commands work along the way.
func TestClusterMatchesLocalEngine(t *testing.T) {
	y := yacht(t)
	c := newCluster(t, 3)
	c.startWorkers(3)
	t0 := time.Now()
	idY := c.submit(y.submitArgs("--id", "yacht-gl")...)
	id2 := c.submit(gl2d().submitArgs()...)
	sy := c.waitJob(idY, 2*time.Minute)
	s2 := c.waitJob(id2, 2*time.Minute)
	t.Logf("both jobs finished in %.1f s", time.Since(t0).Seconds())
	for _, s := range []jobStatus{sy, s2} {
		if s.State != "succeeded" {
			t.Fatalf("job %s: %s: %s", s.ID, s.State, s.Error)
		}
		if s.Hyperparameters == nil || s.Metrics == nil || s.Metrics.ModelBytes == 0 || s.Iteration == 0 {
			t.Errorf("status --json of %s lacks the fit: %+v", s.ID, s)
		}
	}
	if sy.ID != "yacht-gl" || sy.Metrics.NTrain != 278 {
		t.Errorf("yacht: %+v", sy)
	}
	sameModel(t, "gl on yacht split 0", c.model(idY), y.local(t))
	sameModel(t, "gl on the 2-input CSV", c.model(id2), gl2d().local(t))

	// jobs lists both; logs replays the job's events; predict --job matches predict --model.
	out := c.mustClient("jobs")
	if !strings.Contains(out, "yacht-gl") || !strings.Contains(out, id2) || strings.Count(out, "succeeded") != 2 {
		t.Errorf("jobs:\n%s", out)
	}
	out = c.mustClient("logs", id2)
	if !strings.Contains(out, "optimize") || !strings.Contains(out, "succeeded") {
		t.Errorf("logs:\n%s", out)
	}
	dir := t.TempDir()
	local := filepath.Join(dir, "local.gpm")
	if err := os.WriteFile(local, gl2d().local(t), 0o644); err != nil {
		t.Fatal(err)
	}
	pc, pl := filepath.Join(dir, "cluster.csv"), filepath.Join(dir, "local.csv")
	c.mustClient("predict", "--job", id2, "--data", data.test2d, "--header", "--out", pc)
	if out, err := exec.Command(bins.coordinator, "predict", "--model", local, "--data", data.test2d, "--header", "--out", pl).CombinedOutput(); err != nil {
		t.Fatalf("predict --model: %v\n%s", err, out)
	}
	bc, _ := os.ReadFile(pc)
	bl, _ := os.ReadFile(pl)
	if !bytes.Equal(bc, bl) || bytes.Count(bc, []byte("\n")) != 201 {
		t.Errorf("predict --job wrote %d bytes, predict --model %d; they should be the same 201 lines", len(bc), len(bl))
	}

	// cancel: a canceled job says so, and submit --wait on it exits non-zero.
	idC := c.submit(rff2d().submitArgs("--max-iter", "1000")...)
	out = c.mustClient("cancel", idC)
	if !strings.Contains(out, "canceled") {
		t.Errorf("cancel: %s", out)
	}
	if s := c.waitJob(idC, 30*time.Second); s.State != "canceled" {
		t.Errorf("canceled job: %+v", s)
	}
}

// TestLeaderKilledMidJob: kill -9 the leader while a job is in its optimizer; a new leader
// resumes the job from its checkpoint, submit --wait follows it to the new leader, and the
// model is bitwise the uninterrupted one.
func TestLeaderKilledMidJob(t *testing.T) {
	c := newCluster(t, 3)
	c.startWorkers(3)
	j := gl2d()
	want := j.local(t)
	waiter := &proc{name: "submit-wait", bin: bins.coordinator, logPath: filepath.Join(c.dir, "submit.log"),
		args: append([]string{"submit", "--wait", "--json", "--id", "failover", "--addr", c.addrs(), "--leader-wait", "60s"}, j.submitArgs()...),
		env:  []string{"GPREDUCE_TOKEN=" + c.token}}
	waiter.start(t)
	c.all = append(c.all, waiter)
	eventually(t, 30*time.Second, "the job to be submitted", func() error { _, err := c.status("failover"); return err })
	s := c.waitIteration("failover", 3, time.Minute)
	old := c.leader()
	c.coords[old].proc.kill()
	t.Logf("killed leader %s at iteration %d", c.coords[old].id, s.Iteration)

	err, done := waiter.wait(2 * time.Minute)
	if !done {
		t.Fatal("submit --wait did not return within 2 minutes of the leader's death")
	}
	if err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, tail(waiter.log(), 20))
	}
	log := waiter.log()
	final := log[strings.LastIndex(log, "\n{\"id\"")+1:]
	var st jobStatus
	if err := json.Unmarshal([]byte(strings.TrimSpace(final)), &st); err != nil || st.State != "succeeded" {
		t.Fatalf("submit --wait --json: %v: %s", err, tail(log, 5))
	}
	if nl := c.leader(); nl == old {
		t.Fatalf("the killed coordinator %s still leads", c.coords[old].id)
	}
	sameModel(t, "gl after a leader failover", c.model("failover"), want)
}

// TestWorkerKilledMidJob: kill -9 a worker while an rff job (a map round per objective
// evaluation) runs; its shards move to the others and the model is bitwise the one of the
// in-process engine.
func TestWorkerKilledMidJob(t *testing.T) {
	c := newCluster(t, 3)
	c.startWorkers(3)
	j := rff2d()
	want := j.local(t)
	id := c.submit(j.submitArgs("--id", "worker-kill")...)
	s := c.waitIteration(id, 3, time.Minute)
	c.workers[1].kill()
	t.Logf("killed worker w1 at iteration %d", s.Iteration)
	fin := c.waitJob(id, 2*time.Minute)
	if fin.State != "succeeded" {
		t.Fatalf("job: %s: %s", fin.State, fin.Error)
	}
	sameModel(t, "rff after a worker was killed", c.model(id), want)
	c.waitWorkers(2)
}

// TestFullRestart: kill -9 every coordinator and start them again from their data
// directories, without --bootstrap or --join: the finished job, its state and model are
// still there, and a job that was running resumes and ends with the uninterrupted model.
func TestFullRestart(t *testing.T) {
	y := yacht(t)
	c := newCluster(t, 3)
	c.startWorkers(2)
	idA := c.submit(y.submitArgs("--id", "before")...)
	before := c.waitJob(idA, 2*time.Minute)
	if before.State != "succeeded" {
		t.Fatalf("job: %+v", before)
	}
	modelA := c.model(idA)
	j := gl2d()
	idB := c.submit(j.submitArgs("--id", "running")...)
	c.waitIteration(idB, 2, time.Minute)

	for _, co := range c.coords {
		co.proc.kill()
	}
	for i := range c.coords {
		c.startCoordinator(i)
	}
	c.waitMembers(3)
	c.waitWorkers(2)
	// A restarted member serves reads from its own state, which lags (empty, then part of
	// the log replayed) until it has caught up with the log; wait for that, and fail if the
	// finished job never reads back as it was.
	var after jobStatus
	eventually(t, 30*time.Second, "the finished job after the restart", func() error {
		var err error
		if after, err = c.status(idA); err != nil {
			return err
		}
		if !reflect.DeepEqual(after, before) {
			return fmt.Errorf("the finished job reads differently:\nbefore %+v\nafter  %+v", before, after)
		}
		return nil
	})
	if !bytes.Equal(c.model(idA), modelA) {
		t.Error("the finished job's model changed across the restart")
	}
	fin := c.waitJob(idB, 2*time.Minute)
	if fin.State != "succeeded" {
		t.Fatalf("the running job after the restart: %s: %s", fin.State, fin.Error)
	}
	sameModel(t, "gl resumed after a full restart", c.model(idB), j.local(t))
	out := c.mustClient("jobs", "--json")
	var jobs []jobStatus
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || len(jobs) != 2 {
		t.Errorf("jobs --json after the restart: %v %s", err, out)
	}
}

// TestBadDataFailsOnlyItsJob: a CSV with a bad field and a CSV that does not exist fail
// their jobs with messages naming the file (and the line); a job running at the same time
// succeeds with the right model.
func TestBadDataFailsOnlyItsJob(t *testing.T) {
	y := yacht(t)
	c := newCluster(t, 1)
	c.startWorkers(2)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	rows := strings.Split(rows2d(3000, 5), "\n")
	rows[2500] = "0.5,abc,1" // line 2501 of the file
	if err := os.WriteFile(bad, []byte(strings.Join(rows, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "gone.csv")
	csvJob := func(path string) []string {
		return []string{"--method", "gl", "--nodes-per-dim", "10,10", "--lengthscale-bounds", "0.5,2", "--data", path,
			"--header", "--target", "y", "--columns", "a,b", "--shards", "4"}
	}
	idGood := c.submit(y.submitArgs("--id", "good")...)
	idBad := c.submit(csvJob(bad)...)
	idGone := c.submit(csvJob(missing)...)
	for _, k := range []struct {
		id   string
		want []string
	}{{idBad, []string{bad, ":2501:2: the field (3 bytes, with letters) is not a number"}}, {idGone, []string{missing}}} {
		s := c.waitJob(k.id, time.Minute)
		if s.State != "failed" {
			t.Errorf("job on %s: %s, want failed", k.want[0], s.State)
			continue
		}
		for _, w := range k.want {
			if !strings.Contains(s.Error, w) {
				t.Errorf("job %s failed with %q, which does not mention %q", k.id, s.Error, w)
			}
		}
		t.Logf("job %s: %s", k.id, s.Error)
	}
	s := c.waitJob(idGood, 2*time.Minute)
	if s.State != "succeeded" {
		t.Fatalf("the good job: %s: %s", s.State, s.Error)
	}
	sameModel(t, "gl on yacht next to failing jobs", c.model(idGood), y.local(t))
	// status of the failed job exits 0 (the command worked); submit --wait exits 1 with the error.
	_, errOut, err := c.client(append([]string{"submit", "--wait"}, csvJob(bad)...)...)
	if err == nil || !strings.Contains(errOut, "failed") || !strings.Contains(errOut, ":2501:") {
		t.Errorf("submit --wait of a failing job: %v: %s", err, tail(errOut, 3))
	}
}

// TestRejections: calls without the API token, a worker with the wrong join token, and
// malformed job specs are refused with errors that say why.
func TestRejections(t *testing.T) {
	c := newCluster(t, 1)
	args := append([]string{"submit"}, gl2d().submitArgs()...)
	for _, env := range [][]string{nil, {"GPREDUCE_TOKEN=wrong"}} {
		_, errOut, err := c.clientEnv(env, args...)
		if err == nil || !strings.Contains(errOut, "the coordinator rejected the token: pass --token or set GPREDUCE_TOKEN") {
			t.Errorf("submit with env %v: %v: %s", env, err, errOut)
		}
		_, errOut, err = c.clientEnv(env, "jobs")
		if err == nil || !strings.Contains(errOut, "rejected the token") {
			t.Errorf("jobs with env %v: %v: %s", env, err, errOut)
		}
	}
	if out := c.mustClient("jobs", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("a rejected submit left a job: %s", out)
	}

	wrong := c.writeFile("wrong-join-token", "not-the-join-token\n")
	w := c.startWorker("intruder", wrong)
	eventually(t, 20*time.Second, "the worker's rejection in its log", func() error {
		if !strings.Contains(w.log(), "Unauthenticated") {
			return fmt.Errorf("no rejection yet")
		}
		return nil
	})
	if ws, err := c.listWorkers(); err != nil || len(ws) != 0 {
		t.Errorf("a worker with the wrong join token registered: %v %v", ws, err)
	}
	if !strings.Contains(c.coords[0].proc.log(), "rejected call") {
		t.Error("the coordinator did not log the rejected registration")
	}

	dir := t.TempDir()
	for _, k := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "method: gl\nnodes_per_dimension: [3, 3]\ndata: {uri: x.csv}\n", []string{`unknown key "nodes_per_dimension"`, `"nodes_per_dim"`}},
		{"inverted bound", "method: gl\nnoise_variance_bounds: [0.5, 0.01]\ndata: {uri: x.csv}\n", []string{"noise_variance_bounds", "swap"}},
		// Caught by the coordinator, not the client: names without a header.
		{"names without header", "method: gl\ndata: {uri: x.csv, columns: [a, b]}\n", []string{"spec.data.columns", "header"}},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(k.name, " ", "-")+".yaml")
		if err := os.WriteFile(p, []byte(k.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := c.client("submit", p)
		if err == nil {
			t.Errorf("%s: accepted", k.name)
			continue
		}
		for _, want := range k.want {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: %q does not mention %q", k.name, strings.TrimSpace(errOut), want)
			}
		}
	}
	_, errOut, err := c.client(append(args, "--lengthscale-bounds", "2,0.3")...)
	if err == nil || !strings.Contains(errOut, "--lengthscale-bounds") || !strings.Contains(errOut, "swap") {
		t.Errorf("inverted bound flag: %v: %s", err, errOut)
	}
}

// cg2d: RR-CG training on the 2-input data; every CG iteration is a round of kernel tasks.
func cg2d() job {
	j := gl2d()
	j.spec = []string{"--method", "cg", "--truncation", "rr", "--rr-min", "10", "--max-iter", "6", "--probes", "4", "--variance-rank", "20", "--seed", "3"}
	return j
}

// kmcg2d: KMCG on 300 inducing rows of the same data (CG on the coordinator, one map round
// for R = k(X, X_M) S).
func kmcg2d() job {
	j := gl2d()
	j.spec = []string{"--method", "kmcg", "--subset", "300", "--cg-iters", "40", "--max-iter", "10"}
	return j
}

// TestClusterCGMatchesLocalEngine: cg (Russian-roulette truncation) and kmcg jobs on the
// cluster give bitwise the models eval trains with the in-process engine, and the cg job keeps
// its bits when a worker is killed in the middle of it.
func TestClusterCGMatchesLocalEngine(t *testing.T) {
	c := newCluster(t, 3)
	c.startWorkers(3)
	jc, jk := cg2d(), kmcg2d()
	idC := c.submit(jc.submitArgs("--id", "cg-rr")...)
	idK := c.submit(jk.submitArgs("--id", "kmcg")...)
	s := c.waitIteration(idC, 2, 2*time.Minute)
	c.workers[2].kill()
	t.Logf("killed worker w2 at cg iteration %d", s.Iteration)
	for _, id := range []string{idC, idK} {
		if fin := c.waitJob(id, 4*time.Minute); fin.State != "succeeded" {
			t.Fatalf("job %s: %s: %s", id, fin.State, fin.Error)
		}
	}
	sameModel(t, "cg rr with a worker killed", c.model(idC), jc.local(t))
	sameModel(t, "kmcg on a subset", c.model(idK), jk.local(t))
}
