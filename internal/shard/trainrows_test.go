package shard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestTrainRows: a source with TrainRows plans and loads a fixed sample of its rows, in file
// order, cut into row ranges, the same from a plain CSV (otherwise cut into byte ranges) and
// from Load of each shard; TrainRows at or beyond the row count keeps every row, and a
// negative one is refused.
func TestTrainRows(t *testing.T) {
	var b strings.Builder
	b.WriteString("a,y\n")
	for i := range 200 {
		fmt.Fprintf(&b, "%d,%d\n", i, 2*i)
	}
	path := writeFile(t, "rows.csv", b.String())
	all, err := LoadCSV(path, CSVOptions{Header: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		rows, shards, wantRows int
	}{{50, 3, 50}, {50, 0, 50}, {1, 1, 1}, {200, 4, 200}, {500, 2, 200}} {
		src := Source{URI: path, Header: true, TrainRows: tc.rows}
		l, tabs, err := Reader{}.LoadAll(ctx, src, tc.shards)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		got := concat(tabs)
		if got.N() != tc.wantRows {
			t.Fatalf("TrainRows %d: %d rows, want %d", tc.rows, got.N(), tc.wantRows)
		}
		want := all
		if tc.rows < all.N() {
			want = SampleRows(all, tc.rows)
		}
		if d := equalTables(got, want); d != "" {
			t.Errorf("TrainRows %d: %s", tc.rows, d)
		}
		for i := 1; i < got.N(); i++ {
			if got.Y[i] <= got.Y[i-1] {
				t.Fatalf("TrainRows %d: rows out of file order at %d", tc.rows, i)
			}
		}
		for i, ref := range l.Refs {
			if ref.Length != 0 {
				t.Errorf("TrainRows %d: shard %d is a byte range %+v; a sample is cut into row ranges", tc.rows, i, ref)
			}
			one, err := Reader{}.Load(ctx, src, ref)
			if err != nil {
				t.Fatal(err)
			}
			if d := equalTables(one, tabs[i]); d != "" {
				t.Errorf("TrainRows %d: Load of shard %d differs from LoadAll's: %s", tc.rows, i, d)
			}
		}
	}
	a, b2 := SampleRows(all, 30), SampleRows(all, 30)
	if !slices.Equal(a.Y, b2.Y) || slices.Equal(a.Y, all.Y[:30]) {
		t.Error("SampleRows must be fixed and not the first rows")
	}
	if _, err := (Reader{}).Plan(ctx, Source{URI: path, Header: true, TrainRows: -1}, 1); err == nil || !strings.Contains(err.Error(), "train rows -1") {
		t.Errorf("TrainRows -1: %v", err)
	}
}
