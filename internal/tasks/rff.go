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

// RFFTask is the map step of rff at fixed lengthscales. It returns a Sum whose parts are
// G = Z^T Z (upper triangle), b = Z^T y, [y^T y], and with Grad set, for each dimension k,
// E_k = (dZ/dlog l_k)^T Z (s x s) followed by e_k = (dZ/dlog l_k)^T y.
type RFFTask struct {
	RFF          *features.RFF
	Transform    shard.Transform
	Lengthscales []float64
	Grad         bool
}

// Map computes the shard's statistic in fixed row blocks.
func (t *RFFTask) Map(ctx context.Context, _ shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	s, d := t.RFF.NumFeatures(), tab.D
	nd := 0
	if t.Grad {
		nd = d
	}
	sum := &reduce.Sum{Parts: make([][]float64, 3+2*nd), N: tab.N()}
	sum.Parts[0] = make([]float64, s*s)
	sum.Parts[1] = make([]float64, s)
	sum.Parts[2] = make([]float64, 1)
	for k := 0; k < nd; k++ {
		sum.Parts[3+k] = make([]float64, s*s)
		sum.Parts[3+nd+k] = make([]float64, s)
	}
	B := GramBlockRows
	x := make([]float64, d)
	y := make([]float64, B)
	z := make([]float64, B*s)
	dz := make([]float64, nd*B*s) // dZ_k block k at [k*B*s, (k+1)*B*s)
	dls := make([]float64, d*s)
	G := blas64.Symmetric{Uplo: blas.Upper, N: s, Stride: s, Data: sum.Parts[0]}
	for lo := 0; lo < tab.N(); lo += B {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows := min(B, tab.N()-lo)
		for i := 0; i < rows; i++ {
			t.Transform.ApplyRow(tab.Row(lo+i), x)
			y[i] = t.Transform.Y(tab.Y[lo+i])
			sum.Parts[2][0] += y[i] * y[i]
			if nd == 0 {
				t.RFF.Map(t.Lengthscales, x, z[i*s:(i+1)*s])
				continue
			}
			t.RFF.MapGrad(t.Lengthscales, x, z[i*s:(i+1)*s], dls)
			for k := 0; k < nd; k++ {
				copy(dz[k*B*s+i*s:k*B*s+(i+1)*s], dls[k*s:(k+1)*s])
			}
		}
		Z := blas64.General{Rows: rows, Cols: s, Stride: s, Data: z[:rows*s]}
		yv := blas64.Vector{N: rows, Inc: 1, Data: y[:rows]}
		linalg.Syrk(blas.Trans, 1, Z, 1, G)
		blas64.Gemv(blas.Trans, 1, Z, yv, 1, blas64.Vector{N: s, Inc: 1, Data: sum.Parts[1]})
		for k := 0; k < nd; k++ {
			dZ := blas64.General{Rows: rows, Cols: s, Stride: s, Data: dz[k*B*s : k*B*s+rows*s]}
			linalg.Gemm(blas.Trans, blas.NoTrans, 1, dZ, Z, 1, blas64.General{Rows: s, Cols: s, Stride: s, Data: sum.Parts[3+k]})
			blas64.Gemv(blas.Trans, 1, dZ, yv, 1, blas64.Vector{N: s, Inc: 1, Data: sum.Parts[3+nd+k]})
		}
	}
	return sum, nil
}

func init() {
	register(Kind{
		Name:  "rff",
		Types: []engine.Task{(*RFFTask)(nil)},
		Encode: func(task engine.Task) (proto.Message, error) {
			t := task.(*RFFTask)
			return &pb.RFFTask{
				Rff:          &pb.RFFMap{Kernel: t.RFF.Family.String(), D: int32(t.RFF.D), Omega: t.RFF.Omega},
				Transform:    EncodeTransform(t.Transform),
				Lengthscales: t.Lengthscales,
				Grad:         t.Grad,
			}, nil
		},
		Decode: decodeRFF,
		Inputs: func(task engine.Task) []int {
			t := task.(*RFFTask)
			return []int{len(t.Transform.XMean), t.RFF.D}
		},
		Example: func() engine.Task {
			rff, err := features.NewRFF(kernel.RBF, 2, 8, 3)
			if err != nil {
				panic(fmt.Sprintf("tasks: example RFF map: %v", err))
			}
			return &RFFTask{RFF: rff, Transform: smallTransform(), Lengthscales: []float64{0.7, 1.1}, Grad: true}
		},
	})
}

// decodeRFF returns the RFF task a message describes.
func decodeRFF(_ Env, msg proto.Message) (engine.Task, error) {
	r, err := message[*pb.RFFTask]("rff", msg)
	if err != nil {
		return nil, err
	}
	if r.GetRff() == nil || r.GetTransform() == nil {
		return nil, fmt.Errorf("RFF task without feature map or transform")
	}
	fam, err := kernel.ParseFamily(r.Rff.Kernel)
	if err != nil {
		return nil, err
	}
	dd := int(r.Rff.D)
	if dd < 1 || len(r.Rff.Omega)%dd != 0 || len(r.Rff.Omega) == 0 || len(r.Lengthscales) != dd {
		return nil, fmt.Errorf("RFF map of %d frequencies, d=%d, %d lengthscales", len(r.Rff.Omega), dd, len(r.Lengthscales))
	}
	tf, err := DecodeTransform(r.Transform)
	if err != nil {
		return nil, err
	}
	return &RFFTask{RFF: &features.RFF{Family: fam, D: dd, Omega: r.Rff.Omega}, Transform: tf, Lengthscales: r.Lengthscales, Grad: r.Grad}, nil
}
