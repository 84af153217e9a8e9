package integration

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// vofHermite2d: Hermite VOF (9 x 9 = 81 features, dense S) on the 2-input data: full-batch
// L-BFGS on the collapsed bound, every evaluation a round of vof_kuf tasks.
func vofHermite2d() job {
	j := gl2d()
	j.spec = []string{"--method", "vof", "--features", "9", "--covariance", "dense", "--max-iter", "15"}
	return j
}

// vofTrig2d: TrigVOF on the same data with minibatches: Adam, fresh frequency grids and a
// fresh seeded row sample every step, every step a round of vof_trig tasks.
func vofTrig2d() job {
	j := gl2d()
	j.spec = []string{"--method", "vof", "--basis", "trig", "--features", "7", "--frequencies", "10", "--batch-rows", "500",
		"--max-iter", "25", "--seed", "5"}
	return j
}

// TestClusterVOFMatchesLocalEngine: vof jobs (Hermite full batch, TrigVOF minibatches) on 3
// coordinators and 3 workers give bitwise the models eval trains with the in-process engine,
// and the TrigVOF job keeps its bits when a worker is killed in the middle of it.
func TestClusterVOFMatchesLocalEngine(t *testing.T) {
	c := newCluster(t, 3)
	c.startWorkers(3)
	jh, jt := vofHermite2d(), vofTrig2d()
	idH := c.submit(jh.submitArgs("--id", "vof-hermite")...)
	idT := c.submit(jt.submitArgs("--id", "vof-trig")...)
	s := c.waitIteration(idT, 3, 2*time.Minute)
	c.workers[2].kill()
	t.Logf("killed worker w2 at TrigVOF iteration %d", s.Iteration)
	for _, id := range []string{idH, idT} {
		if fin := c.waitJob(id, 4*time.Minute); fin.State != "succeeded" {
			t.Fatalf("job %s: %s: %s", id, fin.State, fin.Error)
		}
	}
	sameModel(t, "vof hermite", c.model(idH), jh.local(t))
	sameModel(t, "vof trig with a worker killed", c.model(idT), jt.local(t))
}

// rows1d returns n rows "t,y" (with a header) of a Mauna-Loa-like series: t uniform on
// [1959, 1998], y a quadratic trend, a yearly cycle and noise, from a fixed linear
// congruential sequence.
func rows1d(n int, seed uint64) string {
	s := seed*0x9E3779B97F4A7C15 + 1
	u := func() float64 {
		s = s*6364136223846793005 + 1442695040888963407
		return float64(s>>11) / (1 << 53)
	}
	var b strings.Builder
	b.WriteString("t,y\n")
	for i := 0; i < n; i++ {
		x := 1959 + 39*u()
		noise := 0.5 * math.Sqrt(-2*math.Log(1-u())) * math.Cos(2*math.Pi*u())
		y := 315 + 0.8*(x-1959) + 0.012*(x-1959)*(x-1959) + 3*math.Sin(2*math.Pi*x) + noise
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(y, 'g', -1, 64))
		b.WriteByte('\n')
	}
	return b.String()
}

// TestVOFMillionRows (GPREDUCE_SOAK=1): Hermite VOF on 10^6 generated 1-D rows in 16 shards
// over 4 workers of 3 coordinators, with a worker killed and then the leader killed mid-job,
// gives bitwise the model `coordinator eval` trains with the in-process engine on the same
// shards.
func TestVOFMillionRows(t *testing.T) {
	if os.Getenv(soakEnv) != "1" {
		t.Skipf("set %s=1 to run the soak tests (10^6 rows, minutes)", soakEnv)
	}
	dir := t.TempDir()
	train, test := filepath.Join(dir, "train1d.csv.gz"), filepath.Join(dir, "test1d.csv")
	if err := writeGzip(train, rows1d(1_000_000, 3)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(test, []byte(rows1d(500, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	j := job{
		spec:   []string{"--method", "vof", "--features", "41", "--max-iter", "30", "--seed", "2"},
		submit: []string{"--data", train, "--header", "--target", "y", "--shards", "16"},
		eval:   []string{"--train", train, "--test", test, "--header", "--target", "y", "--shards", "16"},
	}
	c := newCluster(t, 3)
	c.startWorkers(4)
	id := c.submit(j.submitArgs("--id", "vof-1e6")...)
	s := c.waitIteration(id, 3, 10*time.Minute)
	c.workers[3].kill()
	t.Logf("killed worker w3 at iteration %d", s.Iteration)
	s = c.waitIteration(id, s.Iteration+3, 10*time.Minute)
	old := c.leader()
	c.coords[old].proc.kill()
	t.Logf("killed leader %s at iteration %d", c.coords[old].id, s.Iteration)
	fin := c.waitJob(id, 20*time.Minute)
	if fin.State != "succeeded" {
		t.Fatalf("job: %s: %s", fin.State, fin.Error)
	}
	sameModel(t, "vof on 10^6 rows with a worker and the leader killed", c.model(id), j.local(t))
}
