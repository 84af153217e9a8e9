package shard

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpreduce/gpreduce/internal/reduce"
)

// mergeShards maps task over tab cut into the given number of shards and merges in shard order.
func mergeShards(t *testing.T, task interface {
	Map(context.Context, Ref, *Table) (reduce.Stats, error)
}, tab *Table, shards int) reduce.Stats {
	t.Helper()
	refs, tabs := PartitionCount(tab, shards)
	var acc reduce.Stats
	for i := range refs {
		st, err := task.Map(context.Background(), refs[i], tabs[i])
		if err != nil {
			t.Fatal(err)
		}
		if acc == nil {
			acc = st
		} else if err := acc.Merge(st); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

func TestSampleTaskKeepsSmallestKeys(t *testing.T) {
	tests := []struct {
		name          string
		n, d, k, shds int
		seed          uint64
	}{
		{"many shards", 1000, 3, 50, 7, 1},
		{"one shard", 200, 2, 20, 1, 2},
		{"k above n", 40, 2, 100, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := randomTable(rand.New(rand.NewPCG(tc.seed, 99)), tc.n, tc.d)
			got := mergeShards(t, SampleTask{K: tc.k, Seed: tc.seed}, tab, tc.shds).(*reduce.Sample)
			// Brute force: regenerate every key, stable-sort all rows by key.
			refs, tabs := PartitionCount(tab, tc.shds)
			type row struct {
				u float64
				x []float64
				y float64
			}
			var all []row
			for s := range refs {
				rng := rand.New(rand.NewPCG(tc.seed, uint64(refs[s].Index)))
				for i := 0; i < tabs[s].N(); i++ {
					all = append(all, row{rng.Float64(), tabs[s].Row(i), tabs[s].Y[i]})
				}
			}
			slices.SortStableFunc(all, func(a, b row) int { return cmp.Compare(a.u, b.u) })
			all = all[:min(tc.k, len(all))]
			if len(got.Keys) != len(all) || got.K != tc.k || got.D != tc.d {
				t.Fatalf("%d rows (K %d, D %d), want %d", len(got.Keys), got.K, got.D, len(all))
			}
			for r, w := range all {
				if got.Keys[r] != w.u || got.Y[r] != w.y || !slices.Equal(got.X[r*tc.d:(r+1)*tc.d], w.x) {
					t.Fatalf("sample row %d differs", r)
				}
			}
			again := mergeShards(t, SampleTask{K: tc.k, Seed: tc.seed}, tab, tc.shds).(*reduce.Sample)
			if !slices.Equal(again.Keys, got.Keys) || !slices.Equal(again.X, got.X) {
				t.Fatal("not deterministic")
			}
		})
	}
}

func TestDistinctTaskMatchesWholeTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tab := randomTable(rng, 500, 3)
	for i := 0; i < tab.N(); i++ {
		tab.X[i*3+1] = float64(rng.IntN(3)) // categorical column
		tab.X[i*3+2] = 7                    // constant column
	}
	tests := []struct {
		name   string
		cap    int
		shards int
	}{
		{"cap 10", 10, 6},
		{"cap 2", 2, 4},
		{"cap 0", 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			whole, err := DistinctTask{Cap: tc.cap}.Map(context.Background(), Ref{}, tab)
			if err != nil {
				t.Fatal(err)
			}
			got := mergeShards(t, DistinctTask{Cap: tc.cap}, tab, tc.shards).(*reduce.Distinct)
			w := whole.(*reduce.Distinct)
			for j := 0; j < 3; j++ {
				if !slices.Equal(got.Values[j], w.Values[j]) {
					t.Fatalf("column %d: %v, whole table %v", j, got.Values[j], w.Values[j])
				}
			}
			if len(got.Values[0]) != tc.cap+1 {
				t.Errorf("continuous column kept %d values, want cap+1 = %d", len(got.Values[0]), tc.cap+1)
			}
			if want := []float64{0, 1, 2}[:min(3, tc.cap+1)]; !slices.Equal(got.Values[1], want) {
				t.Errorf("categorical column %v, want %v", got.Values[1], want)
			}
			if !slices.Equal(got.Values[2], []float64{7}) {
				t.Errorf("constant column %v", got.Values[2])
			}
		})
	}
}

func TestSampleTasksErrors(t *testing.T) {
	tab := randomTable(rand.New(rand.NewPCG(1, 1)), 10, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (SampleTask{K: 3}).Map(ctx, Ref{}, tab); !errors.Is(err, context.Canceled) {
		t.Errorf("sample: got %v, want context.Canceled", err)
	}
	if _, err := (DistinctTask{Cap: 3}).Map(ctx, Ref{}, tab); !errors.Is(err, context.Canceled) {
		t.Errorf("distinct: got %v, want context.Canceled", err)
	}
	if _, err := (SampleTask{K: -1}).Map(context.Background(), Ref{}, tab); err == nil {
		t.Error("negative sample size accepted")
	}
	if _, err := (DistinctTask{Cap: -1}).Map(context.Background(), Ref{}, tab); err == nil {
		t.Error("negative cap accepted")
	}
}
