package tasks

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// LOOTask is the map step of the leave-one-out calibration check of a trained model on its
// training rows. The model's posterior must be the exact GP posterior of its (finite-rank)
// kernel at its noise variance s2, as for gl, rff and grief type2: Bayesian linear regression
// on the features. Then, with m_i and v_i the latent mean and variance at training row i (all
// rows in the fit) and r_i = y_i - m_i (standardized units), the leave-one-out predictive of y_i
// (Rasmussen & Williams 2006, §5.4.2, eq. 5.12, with [K_y^-1]_ii = (1 - v_i / s2) / s2 from
// v_i = s2 [K (K + s2 I)^-1]_ii) has mean y_i - r_i s2 / (s2 - v_i) and variance
// s2^2 / (s2 - v_i), so the standardized leave-one-out residual is
//
//	z_i = r_i / sqrt(s2 - v_i),
//
// one prediction per row, no refit. Each z_i depends on row i alone, so a subset of rows
// estimates the mean square: Map takes the shard's rows 0, Stride, 2 Stride, ... and returns
// a Sum with one part {sum z_i^2, #(|z_i| <= 1.96), #rows checked, sum zlo_i^2}, summed in row
// order.
//
// When the predictor's latent variances are the exact ones only to within a relative excess
// g (VarianceGap: a cg variance cache, v_i in [(1 - g) v_i', v_i'] for the cached v_i'), s2 -
// v_i lies in [s2 - v_i', s2 - v_i' + g v_i'], so z_i^2 lies in [zlo_i^2, z_i^2] with
// zlo_i^2 = r_i^2 / (s2 - v_i' + g v_i'): the two sums bracket the exact mean square. Rows
// fitted mostly by their own target (v_i near s2) widen the bracket most. With g = 0 the two
// sums are equal.
type LOOTask struct {
	// Model is the trained model; Encoded is its model file (Model.Bytes), which the task's
	// message carries (encoded per message when nil: set it when the task goes to many shards).
	Model   *model.Model
	Encoded []byte
	// Stride is the step between checked rows of a shard (0 or 1: every row).
	Stride int
	// VarianceGap is g above (0: the variances are exact).
	VarianceGap float64
}

// Map predicts the shard's rows and sums their standardized leave-one-out residuals.
func (t *LOOTask) Map(ctx context.Context, _ shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	m := t.Model
	if tab.D != m.D {
		return nil, fmt.Errorf("loo task: the shard has %d inputs, the model %d", tab.D, m.D)
	}
	predict, err := m.Posterior.Predictor(m)
	if err != nil {
		return nil, fmt.Errorf("loo task: %w", err)
	}
	s2 := m.Hyper.NoiseVariance // standardized, as the predictor's outputs
	d, step := tab.D, max(1, t.Stride)
	checked := (tab.N() + step - 1) / step // rows 0, step, ... below N
	x := make([]float64, GramBlockRows*d)
	mean, vr := make([]float64, GramBlockRows), make([]float64, GramBlockRows)
	var sumZ2, sumLo, inside float64
	for lo := 0; lo < checked; lo += GramBlockRows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows := min(GramBlockRows, checked-lo)
		for i := 0; i < rows; i++ {
			m.Transform.ApplyRow(tab.Row((lo+i)*step), x[i*d:(i+1)*d])
		}
		predict(x[:rows*d], rows, mean[:rows], vr[:rows])
		for i := 0; i < rows; i++ {
			r := m.Transform.Y(tab.Y[(lo+i)*step]) - mean[i]
			// v_i < s2 in exact arithmetic; a row fitted almost wholly by its own target
			// (v_i -> s2) has r_i -> 0 as well, so the floor only guards the division.
			den := math.Max(s2-vr[i], 1e-12*s2)
			z2 := r * r / den
			sumZ2 += z2
			sumLo += r * r / (den + t.VarianceGap*math.Max(vr[i], 0))
			if z2 <= model.Z95*model.Z95 {
				inside++
			}
		}
	}
	return &reduce.Sum{Parts: [][]float64{{sumZ2, inside, float64(checked), sumLo}}, N: tab.N()}, nil
}

func init() {
	register(Kind{
		Name:  "loo",
		Types: []engine.Task{(*LOOTask)(nil)},
		Encode: func(t engine.Task) (proto.Message, error) {
			// Encode may run for many shards at once: it reads the task, never writes it.
			lt := t.(*LOOTask)
			b := lt.Encoded
			if b == nil {
				var err error
				if b, err = lt.Model.Bytes(); err != nil {
					return nil, fmt.Errorf("loo task: %w", err)
				}
			}
			return &pb.LOOTask{Model: b, Stride: int32(lt.Stride), VarianceGap: lt.VarianceGap}, nil
		},
		Decode: func(env Env, msg proto.Message) (engine.Task, error) {
			l, err := message[*pb.LOOTask]("loo", msg)
			if err != nil {
				return nil, err
			}
			if l.GetStride() < 0 {
				return nil, fmt.Errorf("loo task: stride %d is negative", l.GetStride())
			}
			if g := l.GetVarianceGap(); !(g >= 0 && g < 1) {
				return nil, fmt.Errorf("loo task: variance gap %v is not in [0, 1)", g)
			}
			v, err := env.Shared(MapCache, l, func() (any, error) { return model.Decode(bytes.NewReader(l.GetModel())) })
			if err != nil {
				return nil, fmt.Errorf("loo task: model: %w", err)
			}
			return &LOOTask{Model: v.(*model.Model), Encoded: l.GetModel(), Stride: int(l.GetStride()), VarianceGap: l.GetVarianceGap()}, nil
		},
		Inputs: func(t engine.Task) []int {
			return []int{t.(*LOOTask).Model.D}
		},
		Example: func() engine.Task {
			return &LOOTask{Model: smallModel(), Stride: 3, VarianceGap: 0.03}
		},
	})
}

// smallModel is a GRIEF-II model of SmallShard's two inputs with 5 eigenfunctions, for the
// loo kind's example.
func smallModel() *model.Model {
	ls := []float64{0.7, 1.3}
	g, err := features.NewGRIEF(kernel.RBF, ls, 1, [][]float64{{-1, 0, 1}, {-1.5, 0, 0.5, 1.5}}, 5)
	if err != nil {
		panic(fmt.Sprintf("tasks: example GRIEF map: %v", err))
	}
	p := g.NumFeatures()
	beta, c := make([]float64, p), make([]float64, p*p)
	for i := range beta {
		beta[i] = 0.1 * math.Sin(float64(i+1))
		c[i*p+i] = 0.01
	}
	return &model.Model{
		Version: model.Version, Method: "grief", Kernel: "rbf", D: 2, NTrain: smallRows,
		Transform: smallTransform(),
		Hyper:     model.Hyper{Lengthscales: ls, SignalVariance: 1, NoiseVariance: 0.1},
		Posterior: &model.GRIEFPosterior{
			Map: model.GRIEFParams{Lengthscales: g.Lengthscales, SignalVariance: g.SignalVariance,
				Grid: g.Grid, Q: g.Q, LogLam: g.LogLam, Idx: g.Idx, LogLamP: g.LogLamP},
			Post: &model.GRIEFPost{Inference: "type2", Beta: beta, C: c},
		},
	}
}
