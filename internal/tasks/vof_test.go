package tasks

import (
	"slices"
	"testing"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// TestVOFBatchRows: a minibatch keeps about its rate's share of the rows, the same rows for
// the same seed, step and shard, other rows for another step or shard; rate 0 and 1 keep all.
func TestVOFBatchRows(t *testing.T) {
	tab := &shard.Table{Source: "b", D: 1}
	for i := 0; i < 4000; i++ {
		tab.X = append(tab.X, float64(i))
		tab.Y = append(tab.Y, float64(i))
	}
	tf := shard.Transform{XMean: []float64{0}, XScale: []float64{1}, YMean: 0, YScale: 1}
	ref := shard.Ref{Index: 3, Rows: tab.N()}
	b := VOFBatch{Rate: 0.25, Seed: 9, Step: 4}
	_, y := b.rows(ref, tab, tf)
	if n := len(y); n < 900 || n > 1100 {
		t.Errorf("rate 0.25 kept %d of 4000 rows", n)
	}
	_, again := b.rows(ref, tab, tf)
	if !slices.Equal(y, again) {
		t.Error("the same seed, step and shard chose other rows")
	}
	for _, other := range []struct {
		b   VOFBatch
		ref shard.Ref
	}{{VOFBatch{Rate: 0.25, Seed: 9, Step: 5}, ref}, {b, shard.Ref{Index: 4, Rows: tab.N()}}, {VOFBatch{Rate: 0.25, Seed: 10, Step: 4}, ref}} {
		if _, y2 := other.b.rows(other.ref, tab, tf); slices.Equal(y, y2) {
			t.Errorf("%+v on shard %d chose the same rows", other.b, other.ref.Index)
		}
	}
	for _, all := range []VOFBatch{{}, {Rate: 1, Seed: 9}} {
		if _, y := all.rows(ref, tab, tf); len(y) != tab.N() {
			t.Errorf("%+v kept %d of %d rows", all, len(y), tab.N())
		}
	}
}
