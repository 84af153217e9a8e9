package coordinator

import (
	"bytes"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
)

// TestCheckpointer: phase checkpoints and the first optimizer checkpoint are saved at once,
// later ones at most every interval, the last held one on flush; a checkpoint over the
// limit is skipped without stopping the run.
func TestCheckpointer(t *testing.T) {
	n, _ := openSingle(t, func(c *store.Config) { c.MaxCheckpointBytes = 100 })
	ctx := testContext(t)
	mustDo(t, n.SubmitJob(ctx, "j", nil, t0))
	mustDo(t, n.SetState(ctx, "j", store.JobRunning, "", t0))
	r := &runner{node: n, metrics: newMetrics(n, newRegistry(0, zerolog.Nop()))}
	c := &checkpointer{r: r, log: zerolog.Nop(), id: "j", every: time.Hour}
	stored := func() (int, string) {
		j, err := n.Job("j")
		if err != nil {
			t.Fatal(err)
		}
		return j.Iteration, string(j.Checkpoint)
	}
	steps := []struct {
		iter     int
		data     string
		wantIter int
		wantData string
	}{
		{0, "prepared", 0, "prepared"},
		{0, "stats", 0, "stats"},
		{0, "started", 0, "started"},
		{1, "it1", 1, "it1"}, // the optimizer's first
		{2, "it2", 1, "it1"}, // throttled
		{3, "it3", 1, "it1"},
		{4, string(bytes.Repeat([]byte{'x'}, 200)), 1, "it1"}, // too large, and throttled anyway
		{5, "it5", 1, "it1"},
	}
	for _, s := range steps {
		if err := c.save(ctx, s.iter, -1, []byte(s.data)); err != nil {
			t.Fatal(err)
		}
		if it, d := stored(); it != s.wantIter || d != s.wantData {
			t.Fatalf("after saving %d: stored %d %q, want %d %q", s.iter, it, d, s.wantIter, s.wantData)
		}
	}
	mustDo(t, c.flush(ctx))
	if it, d := stored(); it != 5 || d != "it5" {
		t.Fatalf("after flush: %d %q", it, d)
	}
	c.every = 0
	if err := c.save(ctx, 6, -1, bytes.Repeat([]byte{'x'}, 200)); err != nil {
		t.Fatalf("a checkpoint over the limit stopped the run: %v", err)
	}
	if it, _ := stored(); it != 5 {
		t.Fatalf("the large checkpoint was stored")
	}
	mustDo(t, c.save(ctx, 7, -1, []byte("it7")))
	if it, d := stored(); it != 7 || d != "it7" {
		t.Fatalf("with no interval: %d %q", it, d)
	}
}
