package store

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOneCheckpointPerJob: a large checkpoint travels in chunks; each checkpoint replaces the
// last in the blob store; a finished job keeps none; a model over the limit is refused with
// ErrModelTooLarge.
func TestOneCheckpointPerJob(t *testing.T) {
	n, _ := openSingle(t, func(c *Config) { c.MaxModelBytes = 5000 }) // chunks of 1000 bytes
	ctx := testContext(t)
	mustDo(t, n.SubmitJob(ctx, "j", nil, t0))
	mustDo(t, n.SetState(ctx, "j", JobRunning, "", t0))
	files := func() []string {
		entries, err := os.ReadDir(n.fsm.blobs.dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	for i, size := range []int{3500, 200, 4100} { // chunked, inline, chunked
		ck := bytes.Repeat([]byte{byte(i + 1)}, size)
		mustDo(t, n.SaveCheckpoint(ctx, "j", i+1, 0, ck, t0))
		j, err := n.Job("j")
		if err != nil || !bytes.Equal(j.Checkpoint, ck) || j.Iteration != i+1 {
			t.Fatalf("checkpoint %d: %d bytes, iteration %d, %v", i, len(j.Checkpoint), j.Iteration, err)
		}
		if got := files(); !slices.Equal(got, []string{blobHash(ck)}) {
			t.Fatalf("checkpoint %d: blobs %v, want only the last checkpoint's", i, got)
		}
	}
	if err := n.PutModel(ctx, "j", make([]byte, 5001), nil, t0); !errors.Is(err, ErrModelTooLarge) || !strings.Contains(err.Error(), "5001 bytes, limit 5000") {
		t.Fatalf("PutModel over the limit: %v", err)
	}
	mustDo(t, n.SetState(ctx, "j", JobFailed, "stopped", t0))
	if got := files(); len(got) != 0 {
		t.Fatalf("a finished job keeps blobs %v", got)
	}
	if j, _ := n.Job("j"); j.CheckpointHash != "" || j.Checkpoint != nil {
		t.Fatalf("a finished job keeps its checkpoint: %+v", j)
	}
}
