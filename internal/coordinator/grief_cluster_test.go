package coordinator

import (
	"bytes"
	"testing"
	"time"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestServerTrainsGRIEF: GRIEF's map steps (distinct values, the seeded sample, the Gram pass
// over the GRIEF eigenbasis) run on remote workers and give the local engine's model bytes,
// for both inference types.
func TestServerTrainsGRIEF(t *testing.T) {
	t.Parallel()
	s := startSingle(t, nil)
	startWorkers(t, 2, []string{s.APIAddr()}, "")
	waitWorkers(t, s.Server, 2)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)
	path := writeCSV(t, t.TempDir(), "train.csv", 400, 3)
	for _, inf := range []string{"type2", "type1"} {
		js := &pb.JobSpec{
			Method: "grief", Seed: 11, Inference: inf, Grid: 6, Eigenfunctions: 30, MaxIter: 30, Shards: 5,
			Data: &pb.DataSource{Uri: path, Header: true, Target: "y"},
		}
		if inf == "type1" {
			js.Samples = 20
		}
		want := localModel(t, js)
		id := "grief-" + inf
		if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js, Id: id}); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, pb.JobState_JOB_STATE_SUCCEEDED, time.Minute)
		got, err := s.node.Model(id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the cluster's GRIEF model (%d bytes) differs from the local engine's (%d bytes)", inf, len(got), len(want))
		}
	}
}
