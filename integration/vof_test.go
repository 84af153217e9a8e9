package integration

import (
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
