package tasks

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// FeatureMap maps a block of standardized rows to features.
type FeatureMap interface {
	NumFeatures() int
	MapBlock(x []float64, rows int, dst []float64)
}

// GramBlockRows is the fixed row block of the Gram accumulation (GramTask, RFFTask): the
// features of this many rows are formed at once and folded into G by one symmetric rank-k
// update. It is a constant so that the summation order, and so the bits, never depend on
// anything but the shard.
const GramBlockRows = 256

// GramTask is the map step of the feature methods: for one shard it standardizes each row,
// forms its features block by block and returns G = Z^T Z (upper triangle, by BLAS Syrk over
// row blocks), b = Z^T y, y^T y and n. Z is never stored beyond one block.
type GramTask struct {
	Features  FeatureMap
	Transform shard.Transform
}

// Map computes the shard's Gram statistic.
func (t *GramTask) Map(ctx context.Context, _ shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	s, d := t.Features.NumFeatures(), tab.D
	g := reduce.NewGram(s)
	x := make([]float64, GramBlockRows*d)
	y := make([]float64, GramBlockRows)
	z := make([]float64, GramBlockRows*s)
	G := blas64.Symmetric{Uplo: blas.Upper, N: s, Stride: s, Data: g.G}
	for lo := 0; lo < tab.N(); lo += GramBlockRows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows := min(GramBlockRows, tab.N()-lo)
		for i := 0; i < rows; i++ {
			t.Transform.ApplyRow(tab.Row(lo+i), x[i*d:(i+1)*d])
			y[i] = t.Transform.Y(tab.Y[lo+i])
			g.YY += y[i] * y[i]
		}
		t.Features.MapBlock(x[:rows*d], rows, z)
		Z := blas64.General{Rows: rows, Cols: s, Stride: s, Data: z[:rows*s]}
		linalg.Syrk(blas.Trans, 1, Z, 1, G)
		blas64.Gemv(blas.Trans, 1, Z, blas64.Vector{N: rows, Inc: 1, Data: y[:rows]}, 1, blas64.Vector{N: s, Inc: 1, Data: g.B})
	}
	g.N = tab.N()
	return g, nil
}

func init() {
	register(Kind{
		Name:   "gram",
		Types:  []engine.Task{(*GramTask)(nil)},
		Encode: encodeGram,
		Decode: decodeGram,
		Inputs: func(t engine.Task) []int {
			g := t.(*GramTask)
			dims := []int{len(g.Transform.XMean)}
			if gl, ok := g.Features.(*features.GL); ok {
				dims = append(dims, gl.Dim())
			}
			return dims
		},
		Example: func() engine.Task {
			gl, err := features.NewGL(kernel.Matern32, []float64{4, 5}, []int{5, 6})
			if err != nil {
				panic(fmt.Sprintf("tasks: example Gauss-Legendre map: %v", err))
			}
			return &GramTask{Features: gl, Transform: smallTransform()}
		},
	})
}

// encodeGram returns the message of a Gram task over a Gauss-Legendre or GP-GRIEF map.
func encodeGram(task engine.Task) (proto.Message, error) {
	t := task.(*GramTask)
	switch f := t.Features.(type) {
	case *features.GL:
		nodes := make([]int32, len(f.NodesPerDim))
		for i, v := range f.NodesPerDim {
			nodes[i] = int32(v)
		}
		return &pb.GramTask{
			Gl:        &pb.GLMap{Kernel: f.Family.String(), U: f.U, NodesPerDim: nodes},
			Transform: EncodeTransform(t.Transform),
		}, nil
	case *features.GRIEF:
		m, err := EncodeGRIEF(f)
		if err != nil {
			return nil, err
		}
		return &pb.GramTask{Grief: m, Transform: EncodeTransform(t.Transform)}, nil
	}
	return nil, fmt.Errorf("Gram task over %T features has no wire form", t.Features)
}

// decodeGram returns the Gram task a message describes, sharing its feature map with earlier
// tasks of the same map (MapCache).
func decodeGram(env Env, msg proto.Message) (engine.Task, error) {
	g, err := message[*pb.GramTask]("gram", msg)
	if err != nil {
		return nil, err
	}
	if g.GetTransform() == nil || (g.GetGl() == nil) == (g.GetGrief() == nil) {
		return nil, fmt.Errorf("Gram task needs a transform and exactly one feature map (gl or grief)")
	}
	if g.GetGrief() != nil {
		v, err := env.Shared(MapCache, g.Grief, func() (any, error) { return DecodeGRIEF(g.Grief) })
		if err != nil {
			return nil, err
		}
		gr, ok := v.(*features.GRIEF)
		if !ok {
			return nil, fmt.Errorf("cached feature map is a %T", v)
		}
		tf, err := DecodeTransform(g.Transform)
		if err != nil {
			return nil, err
		}
		if len(tf.XMean) != gr.Dim() {
			return nil, fmt.Errorf("GRIEF map of %d inputs with a transform of %d", gr.Dim(), len(tf.XMean))
		}
		return &GramTask{Features: gr, Transform: tf}, nil
	}
	v, err := env.Shared(MapCache, g.Gl, func() (any, error) {
		fam, err := kernel.ParseFamily(g.Gl.Kernel)
		if err != nil {
			return nil, err
		}
		nodes := make([]int, len(g.Gl.NodesPerDim))
		for i, v := range g.Gl.NodesPerDim {
			nodes[i] = int(v)
		}
		return features.NewGL(fam, g.Gl.U, nodes)
	})
	if err != nil {
		return nil, err
	}
	tf, err := DecodeTransform(g.Transform)
	if err != nil {
		return nil, err
	}
	gl, ok := v.(*features.GL)
	if !ok {
		return nil, fmt.Errorf("cached feature map is a %T", v)
	}
	return &GramTask{Features: gl, Transform: tf}, nil
}

// EncodeGRIEF returns the message form of a GP-GRIEF map. It carries the eigendecompositions and
// the selection exactly, so every node evaluates the same features: product kernels tie
// eigenvalues, which Evans & Nair (2018) Theorem 1 assumes simple, so the selection is made
// once, centrally, and never recomputed.
func EncodeGRIEF(g *features.GRIEF) (*pb.GRIEFMap, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	vecs := func(vs [][]float64) []*pb.Vector {
		out := make([]*pb.Vector, len(vs))
		for i, v := range vs {
			out[i] = &pb.Vector{Values: v}
		}
		return out
	}
	idx := make([]int32, len(g.Idx))
	for i, v := range g.Idx {
		idx[i] = int32(v) // Validate bounds it by a grid size
	}
	return &pb.GRIEFMap{
		Kernel:         g.Family.String(),
		Lengthscales:   g.Lengthscales,
		SignalVariance: g.SignalVariance,
		Grid:           vecs(g.Grid),
		Q:              vecs(g.Q),
		LogLam:         vecs(g.LogLam),
		Idx:            idx,
		LogLamP:        g.LogLamP,
	}, nil
}

// DecodeGRIEF returns the GP-GRIEF map a message describes, after GRIEF.Validate.
func DecodeGRIEF(m *pb.GRIEFMap) (*features.GRIEF, error) {
	fam, err := kernel.ParseFamily(m.GetKernel())
	if err != nil {
		return nil, err
	}
	vals := func(vs []*pb.Vector) [][]float64 {
		out := make([][]float64, len(vs))
		for i, v := range vs {
			out[i] = v.GetValues()
		}
		return out
	}
	idx := make([]int, len(m.GetIdx()))
	for i, v := range m.GetIdx() {
		idx[i] = int(v)
	}
	g := &features.GRIEF{
		Family:         fam,
		Lengthscales:   m.GetLengthscales(),
		SignalVariance: m.GetSignalVariance(),
		Grid:           vals(m.GetGrid()),
		Q:              vals(m.GetQ()),
		LogLam:         vals(m.GetLogLam()),
		Idx:            idx,
		LogLamP:        m.GetLogLamP(),
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}
