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
	"github.com/gpreduce/gpreduce/internal/train"
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
	tasks := map[string]engine.Task{
		"moments": shard.MomentsTask{},
		"gram":    &train.GramTask{Features: gl, Transform: tf},
		"rff":     &train.RFFTask{RFF: rff, Transform: tf, Lengthscales: []float64{0.7, 1.1}, Grad: true},
		"rows":    &train.RowsTask{Transform: tf},
	}
	dec := NewDecoder()
	for name, task := range tasks {
		t.Run(name, func(t *testing.T) {
			m, err := EncodeTask(task)
			if err != nil {
				t.Fatal(err)
			}
			back, err := dec.DecodeTask(m)
			if err != nil {
				t.Fatal(err)
			}
			want, err := task.Map(ctx, shard.Ref{}, tab)
			if err != nil {
				t.Fatal(err)
			}
			got, err := back.Map(ctx, shard.Ref{}, tab)
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
	m, _ := EncodeTask(tasks["gram"])
	a, _ := dec.DecodeTask(m)
	b, _ := dec.DecodeTask(m)
	if a.(*train.GramTask).Features != b.(*train.GramTask).Features {
		t.Error("the decoder rebuilt a cached feature map")
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	dec := NewDecoder()
	bad := []*pb.Task{
		{},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{}}},
		{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Gl: &pb.GLMap{Kernel: "nope", U: []float64{1}, NodesPerDim: []int32{4}}, Transform: &pb.Transform{XMean: []float64{0}, XScale: []float64{1}, YScale: 1}}}},
		{Kind: &pb.Task_Rff{Rff: &pb.RFFTask{Rff: &pb.RFFMap{Kernel: "rbf", D: 2, Omega: []float64{1, 2, 3}}, Transform: &pb.Transform{XMean: []float64{0, 0}, XScale: []float64{1, 1}, YScale: 1}, Lengthscales: []float64{1, 1}}}},
		{Kind: &pb.Task_Rows{Rows: &pb.RowsTask{Transform: &pb.Transform{XMean: []float64{0}, XScale: []float64{1, 2}, YScale: 1}}}},
	}
	for i, m := range bad {
		if _, err := dec.DecodeTask(m); err == nil {
			t.Errorf("malformed task %d accepted", i)
		}
	}
	badStats := []*pb.Stats{
		{},
		{Kind: &pb.Stats_Gram{Gram: &pb.Gram{S: 2, G: []float64{1, 2, 3}, B: []float64{1, 2}}}},
		{Kind: &pb.Stats_Moments{Moments: &pb.Moments{Mean: []float64{1}, M2: []float64{1}}}},
		{Kind: &pb.Stats_Rows{Rows: &pb.Rows{D: 2, X: []float64{1, 2, 3}, Y: []float64{1}}}},
	}
	for i, m := range badStats {
		if _, err := DecodeStats(m); err == nil {
			t.Errorf("malformed stats %d accepted", i)
		}
	}
}
