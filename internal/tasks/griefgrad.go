package tasks

import (
	"context"
	"fmt"
	"math"

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

// GRIEFGradTask is the map step of GRIEF-II's lengthscale gradient (Evans & Nair 2018, §6,
// theta learned with w = 1; the derivation is in train's griefIIProblem). With phi the
// unit-signal GRIEF features of a standardized row and y its standardized target, it returns a
// Sum with one part of d values,
//
//	sum over the shard's rows of z_n . dphi(x_n)/dlog l_i,   z_n = C P^-1 phi(x_n) - (A y_n - B phi(x_n) . Beta) Beta,
//
// in fixed blocks of GramBlockRows rows (features.GRIEFGrad holds the selection fixed). P = L
// L^T is given by its Cholesky factor L (p x p row-major, lower triangle read), and P^-1 phi by
// two triangular solves per block; the cost per row is 2 p^2 plus O(p d).
type GRIEFGradTask struct {
	Features  *features.GRIEF
	Transform shard.Transform
	L         []float64
	Beta      []float64
	C, A, B   float64
}

// Map computes the shard's sums.
func (t *GRIEFGradTask) Map(ctx context.Context, _ shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	p, d := t.Features.NumFeatures(), tab.D
	gg, err := features.NewGRIEFGrad(t.Features)
	if err != nil {
		return nil, err
	}
	acc := make([]float64, d)
	x := make([]float64, GramBlockRows*d)
	y := make([]float64, GramBlockRows)
	phi := make([]float64, GramBlockRows*p)
	z := make([]float64, GramBlockRows*p)
	fb := make([]float64, GramBlockRows)
	L := blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: p, Stride: p, Data: t.L}
	beta := blas64.Vector{N: p, Inc: 1, Data: t.Beta}
	for lo := 0; lo < tab.N(); lo += GramBlockRows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows := min(GramBlockRows, tab.N()-lo)
		for i := 0; i < rows; i++ {
			t.Transform.ApplyRow(tab.Row(lo+i), x[i*d:(i+1)*d])
			y[i] = t.Transform.Y(tab.Y[lo+i])
		}
		t.Features.MapBlock(x[:rows*d], rows, phi)
		Phi := blas64.General{Rows: rows, Cols: p, Stride: p, Data: phi[:rows*p]}
		// z = C Phi L^-T L^-1 = C Phi P^-1 (X L^T = Phi, then Z L = C X), then row n less
		// (A y_n - B phi_n . beta) beta.
		copy(z[:rows*p], phi[:rows*p])
		Z := blas64.General{Rows: rows, Cols: p, Stride: p, Data: z[:rows*p]}
		linalg.Trsm(blas.Right, blas.Trans, 1, L, Z)
		linalg.Trsm(blas.Right, blas.NoTrans, t.C, L, Z)
		blas64.Gemv(blas.NoTrans, 1, Phi, beta, 0, blas64.Vector{N: rows, Inc: 1, Data: fb[:rows]})
		for i := 0; i < rows; i++ {
			s := t.A*y[i] - t.B*fb[i]
			zi := z[i*p : (i+1)*p]
			for k, b := range t.Beta {
				zi[k] -= s * b
			}
		}
		gg.Accumulate(x[:rows*d], rows, phi, z, acc)
	}
	return &reduce.Sum{Parts: [][]float64{acc}, N: tab.N()}, nil
}

func init() {
	register(Kind{
		Name:  "grief_grad",
		Types: []engine.Task{(*GRIEFGradTask)(nil)},
		Encode: func(task engine.Task) (proto.Message, error) {
			t := task.(*GRIEFGradTask)
			m, err := EncodeGRIEF(t.Features)
			if err != nil {
				return nil, err
			}
			return &pb.GRIEFGradTask{Grief: m, Transform: EncodeTransform(t.Transform), L: t.L, Beta: t.Beta, C: t.C, A: t.A, B: t.B}, nil
		},
		Decode: decodeGRIEFGrad,
		Inputs: func(task engine.Task) []int {
			t := task.(*GRIEFGradTask)
			return []int{len(t.Transform.XMean), t.Features.Dim()}
		},
		Example: func() engine.Task {
			g, err := features.NewGRIEF(kernel.RBF, []float64{0.7, 1.3}, 1, [][]float64{{-1, 0, 1}, {-1.5, 0, 0.5, 1.5}}, 5)
			if err != nil {
				panic(fmt.Sprintf("tasks: example GRIEF map: %v", err))
			}
			p := g.NumFeatures()
			l := make([]float64, p*p)
			beta := make([]float64, p)
			for i := 0; i < p; i++ {
				l[i*p+i] = 1 + 0.1*float64(i)
				if i > 0 {
					l[i*p+i-1] = 0.2
				}
				beta[i] = math.Sin(float64(i + 1))
			}
			return &GRIEFGradTask{Features: g, Transform: smallTransform(), L: l, Beta: beta, C: 1.2, A: 0.8, B: 0.3}
		},
	})
}

// decodeGRIEFGrad returns the GRIEF gradient task a message describes, sharing its map with
// the Gram tasks of the same map (MapCache), after checking the shapes.
func decodeGRIEFGrad(env Env, msg proto.Message) (engine.Task, error) {
	g, err := message[*pb.GRIEFGradTask]("grief_grad", msg)
	if err != nil {
		return nil, err
	}
	if g.GetGrief() == nil || g.GetTransform() == nil {
		return nil, fmt.Errorf("GRIEF gradient task needs a GRIEF map and a transform")
	}
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
	p := gr.NumFeatures()
	if len(tf.XMean) != gr.Dim() {
		return nil, fmt.Errorf("GRIEF map of %d inputs with a transform of %d", gr.Dim(), len(tf.XMean))
	}
	if len(g.L) != p*p || len(g.Beta) != p {
		return nil, fmt.Errorf("GRIEF gradient task of %d eigenfunctions with a %d-value factor and a %d-value beta; need %d and %d", p, len(g.L), len(g.Beta), p*p, p)
	}
	for _, v := range [][]float64{g.L, g.Beta, {g.C, g.A, g.B}} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("GRIEF gradient task has values that are not finite")
			}
		}
	}
	for i := 0; i < p; i++ {
		if !(g.L[i*p+i] > 0) {
			return nil, fmt.Errorf("GRIEF gradient task: the Cholesky factor's diagonal entry %d is %v; it must be positive", i, g.L[i*p+i])
		}
	}
	return &GRIEFGradTask{Features: gr, Transform: tf, L: g.L, Beta: g.Beta, C: g.C, A: g.A, B: g.B}, nil
}
