package train

// Gauss-Legendre features (Fink Shustin & Avron 2022). The kernel's spectral integral is
// truncated to a box [-U, U]^d and replaced by a tensor Gauss-Legendre rule, giving real
// cos/sin features whose nodes do not depend on the hyperparameters: all lengthscale
// dependence sits in the diagonal weights h_j = w_j p(eta_j; l) (their §4.2). So one pass
// over the data computes G = Z^T Z, b = Z^T y, y^T y and n, and every likelihood-and-gradient
// evaluation afterwards costs O(s^3), independent of n (a W^(1/2)-scaled form of §4.2, derived
// here, that needs no n-vector and never forms W^-1).

import (
	"context"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func init() {
	register(Method{
		Name:     "gl",
		Summary:  "Gauss-Legendre features: one pass over the data, then O(s^3) per iteration (d <= 3)",
		Settings: func() proto.Message { return &pb.GLSettings{} },
		Tasks:    []string{"moments", "sample", "gram", "loo"},
		validate: validateGL,
		train: func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error) {
			return r.trainGL(ctx, eng, p)
		},
	})
}

// glSettings is the spec's *pb.GLSettings, or the defaults.
func glSettings(s *Spec) *pb.GLSettings {
	if g, ok := s.Settings.(*pb.GLSettings); ok && g != nil {
		return g
	}
	return &pb.GLSettings{}
}

// validateGL checks gl's settings for d input columns (0: unknown).
func validateGL(s *Spec, d int) error {
	g := glSettings(s)
	if err := nonNegative(g); err != nil {
		return err
	}
	if d > 0 && len(g.GetNodesPerDim()) != 0 && len(g.GetNodesPerDim()) != d {
		return fmt.Errorf("nodes-per-dim: %d values for %d input columns; give one per column", len(g.GetNodesPerDim()), d)
	}
	for _, v := range g.GetNodesPerDim() {
		if v < 1 {
			return fmt.Errorf("nodes-per-dim: %d must be at least 1", v)
		}
	}
	if d > 0 && len(g.GetGlBox()) != 0 && len(g.GetGlBox()) != d {
		return fmt.Errorf("gl-box: %d values for %d input columns; give one per column", len(g.GetGlBox()), d)
	}
	for _, v := range g.GetGlBox() {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("gl-box: %g must be positive and finite", v)
		}
	}
	return nil
}

func (r *run) trainGL(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	gs := glSettings(&spec)
	maxFeatures := orInt(int(gs.GetMaxFeatures()), DefaultMaxFeatures)
	var nodes []int
	for _, v := range gs.GetNodesPerDim() {
		nodes = append(nodes, int(v))
	}
	fam, _ := kernel.ParseFamily(spec.Kernel)
	d := p.d

	// Step 1: fix the grid once, for the worst case over the box (paper §§5-6): U from
	// the smallest lengthscale, largest signal variance and smallest noise; nodes per
	// dimension from the extent of the inputs (training and, when the spec names them, those
	// to be predicted, with a margin) against aliasing and from the largest lengthscale. When
	// that exceeds the feature budget, features.PlanGL narrows the lengthscale window to what
	// the budget can represent, and the model says so.
	ext, err := glExtent(spec, p, p.lo, p.hi)
	if err != nil {
		return nil, fmt.Errorf("gl: %w", err)
	}
	// The hyperparameter search runs first, on sampled rows over the whole box, so that a
	// budget too small for the whole box can be spent where the likelihood is.
	lower, upper := box(spec, d)
	x0, err := r.searchStart(ctx, eng, p, fam, lower, upper)
	if err != nil {
		return nil, fmt.Errorf("gl: %w", err)
	}
	sizingFor := func(lmin, lmax []float64) (*features.GLPlan, error) {
		return features.PlanGL(fam, features.GLSizing{
			N: p.n, LengthscaleMin: lmin, LengthscaleMax: lmax,
			SignalVarianceMax: spec.SignalVarianceBounds[1], NoiseVarianceMin: spec.NoiseVarianceBounds[0],
			Range: ext, MaxFeatures: maxFeatures, U: gs.GetGlBox(), NodesPerDim: nodes,
		})
	}
	lmin, lmax := make([]float64, d), make([]float64, d)
	for k := range lmin {
		lmin[k], lmax[k] = spec.LengthscaleBounds[0], spec.LengthscaleBounds[1]
	}
	plan, err := sizingFor(lmin, lmax)
	if err != nil {
		return nil, fmt.Errorf("gl: %w", err)
	}
	centred := ""
	if plan.Adjusted && len(gs.GetGlBox()) == 0 {
		// Over budget (max-features, or the nodes-per-dim given): size for a window around
		// the searched lengthscales instead of the whole box, the widest of glWindows that the
		// budget holds without raising its floor (PlanGL keeps a window's top and raises its
		// floor, which would leave the fit outside).
		for _, w := range glWindows() {
			for k := range lmin {
				l0 := math.Exp(x0[k])
				lmin[k] = math.Max(spec.LengthscaleBounds[0], l0/w)
				lmax[k] = math.Min(spec.LengthscaleBounds[1], l0*w)
			}
			if plan, err = sizingFor(lmin, lmax); err != nil {
				return nil, fmt.Errorf("gl: %w", err)
			}
			centred = fmt.Sprintf("lengthscale bounds narrowed to within %gx of the sampled fit's (standardized windows %s to %s)",
				w, fmtFloats(lmin), fmtFloats(lmax))
			if !plan.FloorRaised {
				break
			}
		}
	}
	U, nodes := plan.U, plan.Nodes
	gl, err := features.NewGL(fam, U, nodes)
	if err != nil {
		return nil, fmt.Errorf("gl: %w", err)
	}
	s := gl.NumFeatures()
	obs(Event{Phase: "sizing", Message: fmt.Sprintf("%d Gauss-Legendre features (nodes per dimension %v, box %s)", s, nodes, fmtFloats(U))})
	sizing := ""
	if plan.Adjusted || centred != "" {
		notes := plan.Notes
		if centred != "" {
			notes = append([]string{centred}, notes...)
		}
		budget := fmt.Sprintf("more than max-features %d Gauss-Legendre features", maxFeatures)
		if len(gs.GetNodesPerDim()) > 0 {
			budget = fmt.Sprintf("more Gauss-Legendre nodes than nodes-per-dim %v", gs.GetNodesPerDim())
		}
		sizing = fmt.Sprintf("gl: the lengthscale bounds %g,%g need %s; %s",
			spec.LengthscaleBounds[0], spec.LengthscaleBounds[1], budget, strings.Join(notes, "; "))
		obs(Event{Phase: "sizing", Message: sizing})
	}

	// Step 2: one map-reduce pass for the Gram statistic (streamed as in §4.2, summed over shards),
	// unless a checkpoint carries it.
	g := r.ck.Gram
	if g == nil {
		obs(Event{Phase: "gram", Message: fmt.Sprintf("Gram pass: %d x %d per shard over %d shards", s, s, len(eng.Shards()))})
		st, err := eng.Reduce(ctx, &tasks.GramTask{Features: gl, Transform: p.tf})
		if err != nil {
			return nil, fmt.Errorf("gl: Gram pass: %w", err)
		}
		var ok bool
		if g, ok = st.(*reduce.Gram); !ok {
			return nil, fmt.Errorf("gl: Gram pass returned %T", st)
		}
		if r.ck.GL == nil {
			r.ck.GL = &model.GLParams{U: U, NodesPerDim: nodes}
			if int64(s)*int64(s)*8 <= r.hooks.MaxStatsBytes {
				r.ck.Gram = g
			}
			if err := r.save(ctx); err != nil {
				return nil, err
			}
		}
	}

	// Step 3: the optimizer loop on the reduced statistics alone (O(s^3) per evaluation).
	lik := newGLLikelihood(gl, g)
	x0 = append([]float64(nil), x0...)
	for k := 0; k < d; k++ {
		lower[k], upper[k] = math.Log(plan.LengthscaleMin[k]), math.Log(plan.LengthscaleMax[k])
		x0[k] = clamp(x0[k], lower[k], upper[k])
	}
	fit, err := r.optimize(ctx, lik.objective, x0, lower, upper, p, 0)
	if err != nil {
		return nil, fmt.Errorf("gl: %w", err)
	}

	// Step 4: the posterior at the optimum: beta = D u and the Cholesky factor of M~.
	obs(Event{Phase: "fit", Message: "posterior at the optimum"})
	f, err := lik.eval(fit.theta, false)
	if err != nil {
		return nil, fmt.Errorf("gl: final fit: %w", err)
	}
	m := newModel(spec, p, fit, f.LML)
	m.Posterior = &model.GLPosterior{Map: model.GLParams{U: U, NodesPerDim: nodes}, Features: f.Predictor()}
	m.Domain = glDomain(plan.Width, p.lo, p.hi)
	if sizing != "" {
		m.Sizing = &model.Sizing{LengthscaleMin: plan.LengthscaleMin, LengthscaleMax: plan.LengthscaleMax}
		m.Warn(model.WarnSizing, "%s", sizing)
	}
	r.warnFit(m, p, fit.theta, lower, upper, fit.reason)
	if err := r.checkLOO(ctx, eng, m, 0); err != nil {
		return nil, fmt.Errorf("gl: %w", err)
	}
	return m, nil
}

// glWindows returns the factors, widest first, by which gl's lengthscale window may extend either
// side of the sampled fit's lengthscales when the whole box would need more than the feature
// budget. The sampled fit finds the lengthscales to within a small factor; the widest window
// the budget holds leaves the full-data optimizer the most room.
func glWindows() []float64 { return []float64{10, 5, 3, 2, 1.5, 1.2, 1} }

// DomainMargin widens the input extent the Gauss-Legendre grid is sized for by this share
// of itself, so inputs slightly beyond the known ones stay in the model's domain.
const DomainMargin = 0.1

// glExtent is the per-dimension extent (standardized units) the grid must cover: the union
// of the training inputs' box [lo, hi] and the spec's prediction box, times 1 + DomainMargin.
func glExtent(spec Spec, p *prepared, lo, hi []float64) ([]float64, error) {
	ext := make([]float64, p.d)
	for k := range ext {
		a, b := lo[k], hi[k]
		if len(spec.PredictMin) == p.d && len(spec.PredictMax) == p.d {
			a = math.Min(a, (spec.PredictMin[k]-p.tf.XMean[k])/p.tf.XScale[k])
			b = math.Max(b, (spec.PredictMax[k]-p.tf.XMean[k])/p.tf.XScale[k])
		}
		ext[k] = (b - a) * (1 + DomainMargin)
		if math.IsNaN(ext[k]) || math.IsInf(ext[k], 0) {
			return nil, fmt.Errorf("input column %d: the extent of the inputs to cover is %v", k, ext[k])
		}
	}
	return ext, nil
}

// glDomain is the box of points whose lag to every training input, per dimension, is at
// most the grid's accurate width W_k: [hi_k - W_k, lo_k + W_k]. Inside it every kernel value
// a prediction uses is reproduced by the features; outside, some alias. It always contains
// the training box [lo, hi], where the model was fitted: a grid given by hand (--gl-box,
// --nodes-per-dim) may be narrower than the training inputs, and then trust is the user's.
func glDomain(width, lo, hi []float64) *model.Domain {
	dom := &model.Domain{Lo: make([]float64, len(width)), Hi: make([]float64, len(width))}
	for k, w := range width {
		dom.Lo[k], dom.Hi[k] = math.Min(lo[k], hi[k]-w), math.Max(hi[k], lo[k]+w)
	}
	return dom
}

// glLikelihood evaluates the GL log marginal likelihood from the reduced statistics alone.
// Each evaluation recomputes log h_j = log w_j + log p(eta_j; l) and d log h_j / d log l_k in
// O(s d), then the likelihood and its gradient in O(s^3) (the scaled form derived from §4.2);
// the lengthscale gradient is the chain dL/dlog l_k = sum_j (d log h_j/d log l_k) dL/dlog h_j.
type glLikelihood struct {
	gl          *features.GL
	g           *reduce.Gram
	logh, dlogh []float64
}

func newGLLikelihood(gl *features.GL, g *reduce.Gram) *glLikelihood {
	s := gl.NumFeatures()
	return &glLikelihood{gl: gl, g: g, logh: make([]float64, s), dlogh: make([]float64, s*gl.Dim())}
}

// eval fits the posterior at theta = (log l, log sigma_f^2, log sigma_n^2).
func (l *glLikelihood) eval(theta []float64, grad bool) (*solver.FeatureFit, error) {
	d := l.gl.Dim()
	ls := make([]float64, d)
	for k := range ls {
		ls[k] = math.Exp(theta[k])
	}
	l.gl.LogWeights(ls, l.logh, l.dlogh)
	return solver.FitFeatures(l.g, l.logh, math.Exp(theta[d]), math.Exp(theta[d+1]), grad)
}

// objective is the negative log marginal likelihood and its gradient in theta.
func (l *glLikelihood) objective(theta, grad []float64) (float64, error) {
	d, s := l.gl.Dim(), l.gl.NumFeatures()
	f, err := l.eval(theta, true)
	if err != nil {
		return 0, err
	}
	for k := 0; k < d; k++ {
		var v float64
		for j := 0; j < s; j++ {
			v += l.dlogh[j*d+k] * f.GradLogH[j]
		}
		grad[k] = -v
	}
	grad[d] = -f.GradLogSF2
	grad[d+1] = -f.GradLogSN2
	return -f.LML, nil
}

func fmtFloats(v []float64) string {
	out := "["
	for i, x := range v {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.4g", x)
	}
	return out + "]"
}
