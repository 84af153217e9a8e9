package tasks

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/vof"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The map tasks of vof (variational orthogonal features): VOFKufTask, the Hermite sufficient
// statistics at fixed hyperparameters (vof.KufStats), and VOFTrigTask, the TrigVOF statistics
// on one pair of frequency grids (vof.TrigStats). Both standardize the shard's rows and may
// keep only a seeded minibatch of them (VOFBatch).

// VOFBatch selects the rows of one optimiser step's minibatch: with Rate in (0, 1), row i of
// shard s is kept when the i-th Float64 of the PCG stream (Seed, Step<<32 | s) is below Rate.
// The choice depends only on the seed, the step and the shard layout, so it is the same on
// any number of workers and a resumed job draws the same batches. Rate 0 (or >= 1) keeps
// every row.
type VOFBatch struct {
	Rate       float64
	Seed, Step uint64
}

// rows returns the shard's standardized rows, those of the minibatch only when b selects one.
func (b VOFBatch) rows(ref shard.Ref, tab *shard.Table, tf shard.Transform) (X, y []float64) {
	d := tab.D
	var rng *rand.Rand
	if b.Rate > 0 && b.Rate < 1 {
		rng = rand.New(rand.NewPCG(b.Seed, b.Step<<32|uint64(uint32(ref.Index))))
	}
	x := make([]float64, d)
	for i := 0; i < tab.N(); i++ {
		if rng != nil && !(rng.Float64() < b.Rate) {
			continue
		}
		tf.ApplyRow(tab.Row(i), x)
		X = append(X, x...)
		y = append(y, tf.Y(tab.Y[i]))
	}
	return X, y
}

func encodeBatch(b VOFBatch) *pb.VOFBatch {
	if b == (VOFBatch{}) {
		return nil
	}
	return &pb.VOFBatch{Rate: b.Rate, Seed: b.Seed, Step: b.Step}
}

func decodeBatch(m *pb.VOFBatch) (VOFBatch, error) {
	b := VOFBatch{Rate: m.GetRate(), Seed: m.GetSeed(), Step: m.GetStep()}
	if !(b.Rate >= 0) || b.Rate > 1 {
		return VOFBatch{}, fmt.Errorf("VOF minibatch rate %v: it must lie in [0, 1]", b.Rate)
	}
	return b, nil
}

// VOFKufTask is the map step of VOF with a computed Kuf (closed-form Hermite, or TrigVOF by
// quadrature): the statistics vof.AccumulateKuf of the shard's (minibatch) rows at the
// hyperparameters of Params (lengthscales, variances and feature parameters; its noise, mean
// and covariance factor do not enter), with their derivatives when Grad is set. Xmax bounds
// the absolute standardized inputs (TrigVOF sizes its quadrature rule from it; Hermite ignores
// it).
type VOFKufTask struct {
	Model     vof.Model
	Params    *vof.Params
	Transform shard.Transform
	Grad      bool
	Batch     VOFBatch
	Xmax      float64
}

// Map accumulates the shard's statistics.
func (t *VOFKufTask) Map(ctx context.Context, ref shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mod := qShape(t.Model)
	p, err := mod.InitParams(t.Params.Lengthscales, t.Params.Variances, 1, t.Params.Feature)
	if err != nil {
		return nil, fmt.Errorf("vof_kuf task: %w", err)
	}
	fm, err := vof.NewFeatureMap(mod, p, 0, t.Xmax)
	if err != nil {
		return nil, fmt.Errorf("vof_kuf task: %w", err)
	}
	X, y := t.Batch.rows(ref, tab, t.Transform)
	return vof.AccumulateKuf(fm, p, X, y, tab.D, t.Grad)
}

// VOFTrigTask is the map step of TrigVOF: the statistics vof.AccumulateTrig of the shard's
// (minibatch) rows on Grid at feature parameters A, with the moments for the gradient in A
// when FeatureGrad is set.
type VOFTrigTask struct {
	Grid        *vof.TrigGrid
	A           []float64
	Transform   shard.Transform
	FeatureGrad bool
	Batch       VOFBatch
}

// Map accumulates the shard's statistics.
func (t *VOFTrigTask) Map(ctx context.Context, ref shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	X, y := t.Batch.rows(ref, tab, t.Transform)
	return vof.AccumulateTrig(t.Grid, t.A, X, y, t.FeatureGrad)
}

// qShape is the model the workers build feature maps with: the covariance form does not
// enter Kuf, so the diagonal one spares an M x M factor (only the hyperparameters of a
// task's Params are read; the task's own Params may have a dense factor).
func qShape(m vof.Model) vof.Model {
	m.Dense = false
	return m
}

func init() {
	register(Kind{
		Name:  "vof_kuf",
		Types: []engine.Task{(*VOFKufTask)(nil)},
		Encode: func(task engine.Task) (proto.Message, error) {
			t := task.(*VOFKufTask)
			m := t.Model
			return &pb.VOFKufTask{
				Model: &pb.VOFModel{Basis: m.Basis.String(), Kernel: m.Family.String(), D: int32(m.Dim), M1: int32(m.M1),
					Additive: m.Additive, Dense: m.Dense, MaxFeatures: int32(m.MaxFeatures)},
				Transform:    EncodeTransform(t.Transform),
				Lengthscales: t.Params.Lengthscales,
				Variances:    t.Params.Variances,
				Feature:      t.Params.Feature,
				Grad:         t.Grad,
				Batch:        encodeBatch(t.Batch),
				Xmax:         t.Xmax,
			}, nil
		},
		Decode: decodeVOFKuf,
		Inputs: func(task engine.Task) []int {
			t := task.(*VOFKufTask)
			return []int{len(t.Transform.XMean), t.Model.Dim}
		},
		Example: func() engine.Task {
			mod := vof.Model{Basis: vof.Hermite, Family: kernel.RBF, Dim: 2, M1: 3}
			p, err := mod.InitParams([]float64{0.8, 1.2}, []float64{1.1}, 1, []float64{1.5, 1.3})
			if err != nil {
				panic(fmt.Sprintf("tasks: example VOF parameters: %v", err))
			}
			return &VOFKufTask{Model: mod, Params: p, Transform: smallTransform(), Grad: true, Batch: VOFBatch{Rate: 0.5, Seed: 3, Step: 2}}
		},
	})
	register(Kind{
		Name:  "vof_trig",
		Types: []engine.Task{(*VOFTrigTask)(nil)},
		Encode: func(task engine.Task) (proto.Message, error) {
			t := task.(*VOFTrigTask)
			g := t.Grid
			return &pb.VOFTrigTask{D: int32(g.Dim), T1: int32(g.T1), Additive: g.Additive, U1: g.U1, U2: g.U2, A: t.A,
				Transform: EncodeTransform(t.Transform), FeatureGrad: t.FeatureGrad, Batch: encodeBatch(t.Batch)}, nil
		},
		Decode: decodeVOFTrig,
		Inputs: func(task engine.Task) []int {
			t := task.(*VOFTrigTask)
			return []int{len(t.Transform.XMean), t.Grid.Dim}
		},
		Example: func() engine.Task {
			mod := vof.Model{Basis: vof.Trig, Family: kernel.Matern32, Dim: 2, M1: 3}
			g, err := vof.TrigGridForStep(mod, 3, 5, 1)
			if err != nil {
				panic(fmt.Sprintf("tasks: example TrigVOF grid: %v", err))
			}
			return &VOFTrigTask{Grid: g, A: []float64{4, 5}, Transform: smallTransform(), FeatureGrad: true}
		},
	})
}

// decodeVOFKuf returns the Hermite VOF task a message describes.
func decodeVOFKuf(_ Env, msg proto.Message) (engine.Task, error) {
	r, err := message[*pb.VOFKufTask]("vof_kuf", msg)
	if err != nil {
		return nil, err
	}
	pm := r.GetModel()
	if pm == nil {
		return nil, fmt.Errorf("vof_kuf task without a model")
	}
	basis, err := vof.ParseBasis(pm.GetBasis())
	if err != nil {
		return nil, err
	}
	if xm := r.GetXmax(); !(xm >= 0) || math.IsInf(xm, 0) {
		return nil, fmt.Errorf("vof_kuf task: input bound xmax %v must be finite and non-negative", xm)
	}
	fam, err := kernel.ParseFamily(pm.GetKernel())
	if err != nil {
		return nil, err
	}
	mod := vof.Model{Basis: basis, Family: fam, Dim: int(pm.GetD()), M1: int(pm.GetM1()), Additive: pm.GetAdditive(),
		Dense: pm.GetDense(), MaxFeatures: int(pm.GetMaxFeatures())}
	if _, err := mod.Validate(); err != nil {
		return nil, err
	}
	if len(r.Lengthscales) != mod.Dim || len(r.Variances) != mod.NumVariances() || len(r.Feature) != mod.Dim {
		return nil, fmt.Errorf("vof_kuf task: %d lengthscales, %d variances and %d feature parameters for %d inputs", len(r.Lengthscales), len(r.Variances), len(r.Feature), mod.Dim)
	}
	tf, err := DecodeTransform(r.GetTransform())
	if err != nil {
		return nil, err
	}
	b, err := decodeBatch(r.GetBatch())
	if err != nil {
		return nil, err
	}
	p, err := qShape(mod).InitParams(r.Lengthscales, r.Variances, 1, r.Feature)
	if err != nil {
		return nil, fmt.Errorf("vof_kuf task: %w", err)
	}
	return &VOFKufTask{Model: mod, Params: p, Transform: tf, Grad: r.Grad, Batch: b, Xmax: r.GetXmax()}, nil
}

// decodeVOFTrig returns the TrigVOF task a message describes.
func decodeVOFTrig(_ Env, msg proto.Message) (engine.Task, error) {
	r, err := message[*pb.VOFTrigTask]("vof_trig", msg)
	if err != nil {
		return nil, err
	}
	d, t1 := int(r.GetD()), int(r.GetT1())
	if d < 1 || t1 < 1 || len(r.A) != d || len(r.U1) != len(r.U2) || len(r.U1) == 0 || len(r.U1)%d != 0 || len(r.U1)/d > vof.MaxTrigPoints {
		return nil, fmt.Errorf("vof_trig task: grids of %d and %d coordinates, %d feature parameters, d=%d, t1=%d", len(r.U1), len(r.U2), len(r.A), d, t1)
	}
	T := len(r.U1) / d
	want := d * t1
	if !r.Additive {
		want = 1
		for k := 0; k < d && want <= vof.MaxTrigPoints; k++ {
			want *= t1
		}
	}
	if T != want {
		return nil, fmt.Errorf("vof_trig task: %d points per grid, want %d for t1=%d in %d inputs", T, want, t1, d)
	}
	for _, a := range r.A {
		if !(a > 0) {
			return nil, fmt.Errorf("vof_trig task: feature parameter a %v must be positive", a)
		}
	}
	tf, err := DecodeTransform(r.GetTransform())
	if err != nil {
		return nil, err
	}
	b, err := decodeBatch(r.GetBatch())
	if err != nil {
		return nil, err
	}
	g := &vof.TrigGrid{Dim: d, T1: t1, Additive: r.Additive, U1: r.U1, U2: r.U2}
	return &VOFTrigTask{Grid: g, A: r.A, Transform: tf, FeatureGrad: r.FeatureGrad, Batch: b}, nil
}

// The statistics of the vof tasks: vof.KufStats (field vof_kuf of pb.Stats) and
// vof.TrigStats (vof_trig). Their examples are what the kinds' examples compute on
// SmallShard.
func init() {
	registerStat(newStat("vof_kuf", encodeKufStats, decodeKufStats, func() reduce.Stats { return exampleStats("vof_kuf") }))
	registerStat(newStat("vof_trig", encodeTrigStats, decodeTrigStats, func() reduce.Stats { return exampleStats("vof_trig") }))
}

// exampleStats returns what the Example of the task kind computes on SmallShard.
func exampleStats(kind string) reduce.Stats {
	k, ok := Lookup(kind)
	if !ok {
		panic(fmt.Sprintf("tasks: no task kind %q", kind))
	}
	ref, tab := SmallShard()
	s, err := k.Example().Map(context.Background(), ref, tab)
	if err != nil {
		panic(fmt.Sprintf("tasks: example statistics of %s: %v", kind, err))
	}
	return s
}

func encodeKufStats(s *vof.KufStats) (*pb.VOFKufStats, error) {
	return &pb.VOFKufStats{M: int32(s.M), NShape: int32(s.NShape), N: int64(s.N),
		Theta: s.Theta, Yy: s.YY, Ky: s.KY, Kk: s.KK, Dky: s.DKY, Dkk: s.DKK}, nil
}

func decodeKufStats(v *pb.VOFKufStats) (reduce.Stats, error) {
	M, P := int(v.GetM()), int(v.GetNShape())
	ky, kk, dky, dkk := v.GetKy(), v.GetKk(), v.GetDky(), v.GetDkk()
	hasGrad := len(dky) > 0 || len(dkk) > 0
	if M < 1 || P < 0 || v.GetN() < 0 || len(ky) != M || len(kk) != M*M || (hasGrad && (len(dky) != P*M || len(dkk) != P*M*M)) {
		return nil, fmt.Errorf("VOF statistics of %d features and %d directions with %d, %d, %d and %d values", M, P, len(ky), len(kk), len(dky), len(dkk))
	}
	return &vof.KufStats{M: M, NShape: P, N: int(v.GetN()), Theta: v.GetTheta(), YY: v.GetYy(), KY: ky, KK: kk, DKY: dky, DKK: dkk}, nil
}

func encodeTrigStats(s *vof.TrigStats) (*pb.VOFTrigStats, error) {
	vecs := func(blocks ...[4][]float64) []*pb.Vector {
		var out []*pb.Vector
		for _, b := range blocks {
			out = append(out, vectors(b[:])...)
		}
		return out
	}
	return &pb.VOFTrigStats{T: int32(s.T), D: int32(s.Dim), Grid: s.Grid, N: int64(s.N), Yy: s.YY,
		B: vecs(s.B), P: vecs(s.P), Xb: vecs(s.XB...), Xp: vecs(s.XP...)}, nil
}

func decodeTrigStats(v *pb.VOFTrigStats) (reduce.Stats, error) {
	T, d := int(v.GetT()), int(v.GetD())
	b, p, xb, xp := v.GetB(), v.GetP(), v.GetXb(), v.GetXp()
	if T < 1 || d < 1 || v.GetN() < 0 || len(b) != 4 || len(p) != 4 || len(xb) != len(xp) || (len(xb) != 0 && len(xb) != 4*d) {
		return nil, fmt.Errorf("TrigVOF statistics of %d frequencies in %d inputs with %d, %d, %d and %d blocks", T, d, len(b), len(p), len(xb), len(xp))
	}
	st := &vof.TrigStats{T: T, Dim: d, Grid: v.GetGrid(), N: int(v.GetN()), YY: v.GetYy()}
	for i := 0; i < 4; i++ {
		st.B[i], st.P[i] = b[i].GetValues(), p[i].GetValues()
		if len(st.B[i]) != T || len(st.P[i]) != T*T {
			return nil, fmt.Errorf("TrigVOF block %d has %d and %d values for %d frequencies", i, len(st.B[i]), len(st.P[i]), T)
		}
	}
	if len(xb) > 0 {
		st.XB, st.XP = make([][4][]float64, d), make([][4][]float64, d)
		for k := 0; k < d; k++ {
			for i := 0; i < 4; i++ {
				st.XB[k][i], st.XP[k][i] = xb[4*k+i].GetValues(), xp[4*k+i].GetValues()
				if len(st.XB[k][i]) != T || len(st.XP[k][i]) != T*T {
					return nil, fmt.Errorf("TrigVOF moment block %d of input %d has %d and %d values for %d frequencies", i, k, len(st.XB[k][i]), len(st.XP[k][i]), T)
				}
			}
		}
	}
	return st, nil
}
