package wire

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func table() *shard.Table {
	t := &shard.Table{Source: "mem", D: 2}
	for i := 0; i < 300; i++ {
		a, b := math.Sin(float64(i)), math.Cos(float64(i)*0.3)
		t.X = append(t.X, a, b)
		t.Y = append(t.Y, a*b+0.1*math.Sin(float64(i)*7))
	}
	return t
}

// TestTaskRoundTrip: every task survives encode/decode and its decoded form computes the
// same statistics, bit for bit, and the statistics survive their own round trip.
func TestTaskRoundTrip(t *testing.T) {
	tab := table()
	ctx := context.Background()
	mom, err := shard.MomentsTask{}.Map(ctx, shard.Ref{}, tab)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := shard.NewTransform(mom.(*reduce.Moments), nil)
	if err != nil {
		t.Fatal(err)
	}
	gl, err := features.NewGL(kernel.Matern32, []float64{4, 5}, []int{7, 8})
	if err != nil {
		t.Fatal(err)
	}
	rff, err := features.NewRFF(kernel.RBF, 2, 16, 3)
	if err != nil {
		t.Fatal(err)
	}
	grief, err := features.NewGRIEF(kernel.Matern32, []float64{0.8, 1.3}, 1.4, [][]float64{{-1, 0, 1, 2}, {-2, -0.5, 1}}, 7)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]engine.Task{
		"moments":      shard.MomentsTask{},
		"grief":        &tasks.GramTask{Features: grief, Transform: tf},
		"distinct":     shard.DistinctTask{Cap: 10},
		"distinct ptr": &shard.DistinctTask{Cap: 400},
		"sample":       shard.SampleTask{K: 25, Seed: 77},
		"sample ptr":   &shard.SampleTask{K: 1000, Seed: 3},
		"gram":         &tasks.GramTask{Features: gl, Transform: tf},
		"rff":          &tasks.RFFTask{RFF: rff, Transform: tf, Lengthscales: []float64{0.7, 1.1}, Grad: true},
		"rows":         &tasks.RowsTask{Transform: tf},
	}
	dec := NewDecoder()
	for name, task := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := EncodeTask(task)
			if err != nil {
				t.Fatal(err)
			}
			back, err := dec.DecodeTask(m)
			if err != nil {
				t.Fatal(err)
			}
			want, err := task.Map(ctx, shard.Ref{Index: 3}, tab)
			if err != nil {
				t.Fatal(err)
			}
			got, err := back.Map(ctx, shard.Ref{Index: 3}, tab)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatal("decoded task computes different statistics")
			}
			sm, err := EncodeStats(got)
			if err != nil {
				t.Fatal(err)
			}
			st, err := DecodeStats(sm)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, st) {
				t.Fatal("statistics changed in a round trip")
			}
		})
	}
	// The decoder shares one feature map among tasks with the same map.
	m, _ := EncodeTask(cases["gram"])
	a, _ := dec.DecodeTask(m)
	b, _ := dec.DecodeTask(m)
	if a.(*tasks.GramTask).Features != b.(*tasks.GramTask).Features {
		t.Error("the decoder rebuilt a cached feature map")
	}
	m, _ = EncodeTask(cases["grief"])
	a, _ = dec.DecodeTask(m)
	b, _ = dec.DecodeTask(m)
	if a.(*tasks.GramTask).Features != b.(*tasks.GramTask).Features {
		t.Error("the decoder rebuilt a cached GRIEF map")
	}
	if !reflect.DeepEqual(a.(*tasks.GramTask).Features, grief) {
		t.Error("the decoded GRIEF map differs from the original")
	}
}

// goodGRIEF returns the message of a valid 2-D GRIEF map.
func goodGRIEF(t *testing.T) *pb.GRIEFMap {
	t.Helper()
	g, err := features.NewGRIEF(kernel.RBF, []float64{1, 2}, 1, [][]float64{{0, 1, 2}, {0, 1}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tasks.EncodeGRIEF(g)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func spoilGRIEF(t *testing.T, spoil func(*pb.GRIEFMap)) *pb.GRIEFMap {
	m := goodGRIEF(t)
	spoil(m)
	return m
}

func TestDecodeRejectsMalformed(t *testing.T) {
	dec := NewDecoder()
	tf2 := &pb.Transform{XMean: []float64{0, 0}, XScale: []float64{1, 1}, YScale: 1}
	bad := []*pb.Task{
		{},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Gl: &pb.GLMap{Kernel: "nope", U: []float64{1}, NodesPerDim: []int32{4}}, Transform: &pb.Transform{XMean: []float64{0}, XScale: []float64{1}, YScale: 1}}}},
		{Kind: &pb.Task_Rff{Rff: &pb.RFFTask{Rff: &pb.RFFMap{Kernel: "rbf", D: 2, Omega: []float64{1, 2, 3}}, Transform: &pb.Transform{XMean: []float64{0, 0}, XScale: []float64{1, 1}, YScale: 1}, Lengthscales: []float64{1, 1}}}},
		{Kind: &pb.Task_Rows{Rows: &pb.RowsTask{Transform: &pb.Transform{XMean: []float64{0}, XScale: []float64{1, 2}, YScale: 1}}}},
		{Kind: &pb.Task_Distinct{Distinct: &pb.DistinctTask{Cap: -1}}},
		{Kind: &pb.Task_Sample{Sample: &pb.SampleTask{K: -2}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: goodGRIEF(t), Gl: &pb.GLMap{Kernel: "rbf", U: []float64{1, 1}, NodesPerDim: []int32{4, 4}}, Transform: tf2}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: goodGRIEF(t)}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: goodGRIEF(t), Transform: &pb.Transform{XMean: []float64{0}, XScale: []float64{1}, YScale: 1}}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: spoilGRIEF(t, func(m *pb.GRIEFMap) { m.Kernel = "nope" }), Transform: tf2}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: spoilGRIEF(t, func(m *pb.GRIEFMap) { m.Idx[0] = 9 }), Transform: tf2}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: spoilGRIEF(t, func(m *pb.GRIEFMap) { m.Q = m.Q[:1] }), Transform: tf2}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: spoilGRIEF(t, func(m *pb.GRIEFMap) { m.LogLamP = nil }), Transform: tf2}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: spoilGRIEF(t, func(m *pb.GRIEFMap) { m.Grid[1].Values = nil }), Transform: tf2}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: spoilGRIEF(t, func(m *pb.GRIEFMap) { m.SignalVariance = -1 }), Transform: tf2}}},
	}
	for i, m := range bad {
		if _, err := dec.DecodeTask(m); err == nil {
			t.Errorf("malformed task %d accepted", i)
		}
	}
}
