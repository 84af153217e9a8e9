package train

// Random Fourier features (Rahimi & Recht 2008), the baseline of papers 000 and 004. Base
// frequencies Omega are drawn once from the spectral density with unit lengthscales (seeded
// by the job seed); the features cos and sin of x^T L^-1 omega_r then depend on the
// lengthscales, so unlike Gauss-Legendre features every likelihood evaluation needs a pass
// over the data: G(l), b(l) and their lengthscale derivatives dG = E + E^T, db = e with
// E = (dZ/dlog l_k)^T Z and e = (dZ/dlog l_k)^T y (Fink Shustin & Avron 2022, §4.3;
// O(n s^2 d) per pass).
// The weights are fixed, h_j = 2/s, so the likelihood is the same feature likelihood as gl.

import (
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
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// DefaultRFFFeatures is rff's number of features when the settings leave it at 0.
const DefaultRFFFeatures = 512

func init() {
	register(Method{
		Name:     "rff",
		Summary:  "random Fourier features: a pass over the data per likelihood evaluation",
		Settings: func() proto.Message { return &pb.RFFSettings{} },
		Tasks:    []string{"moments", "sample", "rff", "loo"},
		Draws:    "frequencies",
		validate: validateRFF,
		train: func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error) {
			return r.trainRFF(ctx, eng, p)
		},
	})
}

// rffSettings is the spec's *pb.RFFSettings, or the defaults.
func rffSettings(s *Spec) *pb.RFFSettings {
	if g, ok := s.Settings.(*pb.RFFSettings); ok && g != nil {
		return g
	}
	return &pb.RFFSettings{}
}

// validateRFF checks rff's settings.
func validateRFF(s *Spec, _ int) error {
	f := rffSettings(s)
	if err := nonNegative(f); err != nil {
		return err
	}
	if f.GetFeatures() != 0 && (f.GetFeatures() < 2 || f.GetFeatures()%2 != 0) {
		return fmt.Errorf("features: rff needs an even number of features >= 2, got %d", f.GetFeatures())
	}
	return nil
}

func (r *run) trainRFF(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	fam, _ := kernel.ParseFamily(spec.Kernel)
	d := p.d
	rs := rffSettings(&spec)
	s := orInt(int(rs.GetFeatures()), DefaultRFFFeatures)
	maxFeatures := orInt(int(rs.GetMaxFeatures()), DefaultMaxFeatures)
	if s > maxFeatures {
		return nil, fmt.Errorf("features: %d random Fourier features exceed the limit of %d (max-features); the Gram matrix alone would take %.1f GiB", s, maxFeatures, float64(s)*float64(s)*8/(1<<30))
	}
	rff, err := features.NewRFF(fam, d, s, spec.Seed)
	if err != nil {
		return nil, fmt.Errorf("rff: %w", err)
	}
	obs(Event{Phase: "sizing", Message: fmt.Sprintf("%d random Fourier features (seed %d)", s, spec.Seed)})
	logh := make([]float64, s)
	for j := range logh {
		logh[j] = rff.LogWeight()
	}

	lik := &rffLikelihood{ctx: ctx, eng: eng, rff: rff, tf: p.tf, logh: logh}
	lower, upper := box(spec, d)
	x0, err := r.searchStart(ctx, eng, p, fam, lower, upper)
	if err != nil {
		return nil, fmt.Errorf("rff: %w", err)
	}
	fit, err := r.optimize(ctx, lik.objective, x0, lower, upper, p, 0)
	if err != nil {
		return nil, fmt.Errorf("rff: %w", err)
	}

	obs(Event{Phase: "fit", Message: "posterior at the optimum"})
	f, _, err := lik.eval(fit.theta, false)
	if err != nil {
		return nil, fmt.Errorf("rff: final fit: %w", err)
	}
	m := newModel(spec, p, fit, f.LML)
	m.Posterior = &model.RFFPosterior{Map: model.RFFParams{Omega: rff.Omega, Features: s}, Features: f.Predictor()}
	r.warnFit(m, p, fit.theta, lower, upper, fit.reason)
	if err := r.checkLOO(ctx, eng, m, 0); err != nil {
		return nil, fmt.Errorf("rff: %w", err)
	}
	return m, nil
}

// rffLikelihood evaluates the RFF log marginal likelihood: one pass over the shards for the
// statistics at the current lengthscales, then O(s^3 d) for the likelihood and gradient.
type rffLikelihood struct {
	ctx  context.Context
	eng  engine.Engine
	rff  *features.RFF
	tf   shard.Transform
	logh []float64
}

func (l *rffLikelihood) eval(theta []float64, grad bool) (*solver.FeatureFit, *reduce.Sum, error) {
	d, s := l.rff.D, l.rff.NumFeatures()
	ls := make([]float64, d)
	for k := range ls {
		ls[k] = math.Exp(theta[k])
	}
	st, err := l.eng.Reduce(l.ctx, &tasks.RFFTask{RFF: l.rff, Transform: l.tf, Lengthscales: ls, Grad: grad})
	if err != nil {
		return nil, nil, fmt.Errorf("rff pass: %w", err)
	}
	sum, ok := st.(*reduce.Sum)
	if !ok {
		return nil, nil, fmt.Errorf("rff pass returned %T", st)
	}
	f, err := solver.FitFeatures(rffGram(sum, s), l.logh, math.Exp(theta[d]), math.Exp(theta[d+1]), grad)
	return f, sum, err
}

func (l *rffLikelihood) objective(theta, grad []float64) (float64, error) {
	d := l.rff.D
	f, sum, err := l.eval(theta, true)
	if err != nil {
		return 0, err
	}
	for k := 0; k < d; k++ {
		v, err := f.GramDerivative(sum.Parts[3+k], sum.Parts[3+d+k])
		if err != nil {
			return 0, err
		}
		grad[k] = -v
	}
	grad[d] = -f.GradLogSF2
	grad[d+1] = -f.GradLogSN2
	return -f.LML, nil
}

// rffGram views the first three parts of an RFF statistic as a Gram statistic.
func rffGram(sum *reduce.Sum, s int) *reduce.Gram {
	return &reduce.Gram{S: s, G: sum.Parts[0], B: sum.Parts[1], YY: sum.Parts[2][0], N: sum.N}
}
