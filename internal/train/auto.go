package train

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Auto is the method name that lets Run choose the method from the data (chooseMethod).
const Auto = "auto"

// AutoMaxGLDim is the largest input dimension for which auto considers gl: the tensor grid
// has prod_k s_k features, exponential in d (Fink Shustin & Avron 2022, §8: the method has
// "not escaped from the curse of dimensionality").
const AutoMaxGLDim = 3

// AutoSummary is one line on the automatic choice (chooseMethod), for help texts.
func AutoSummary() string {
	return fmt.Sprintf("exact for small n, gl for d <= %d when its grid fits max-features, cg up to cg-max-rows, grief otherwise, then %s if grief's fit is all noise and the sampled exact fit's is not", AutoMaxGLDim, AutoFallbackMethod)
}

// chooseMethod picks the method for Spec.Method == "auto" from the row count n, the input
// dimension d and the budgets, and says why:
//
//   - exact when n <= exact-max-rows: the reference itself, O(n^3) per iteration on the
//     coordinator and n^2 floats of memory there;
//   - gl when d <= AutoMaxGLDim and the Gauss-Legendre grid for the requested bounds fits
//     max-features without raising the lower lengthscale bound (features.PlanGL may lower the
//     resolution or cap an upper bound where the kernel is flat): one pass over the data,
//     then O(s^3) per iteration independent of n, with the exact GP's answer to the kernel's
//     quadrature error;
//   - cg when n <= cg-max-rows: the exact GP's likelihood and posterior by preconditioned
//     conjugate gradients with randomized truncation (Potapczynski et al. 2021), O(J n^2 d)
//     per Adam step over the workers, so it fits the same model as exact where GP-GRIEF's
//     eigenfunction basis would fit an approximation of it (elevators split 0: RMSE 0.0909
//     against grief's 0.0949);
//   - grief otherwise: one pass per evaluation, O(n p^2), for any d and n.
//
// kmcg is never chosen automatically: cg is the same exact GP with an unbiased gradient.
func chooseMethod(spec Spec, p *prepared, ext []float64) (method, reason string) {
	as := autoSettings(&spec)
	limit := orInt(int(as.GetExactMaxRows()), DefaultExactMaxRows)
	maxFeatures := orInt(int(as.GetMaxFeatures()), DefaultMaxFeatures)
	cgMax := orInt(int(as.GetCgMaxRows()), DefaultCGMaxRows)
	if p.n <= limit {
		return "exact", fmt.Sprintf("n = %d <= exact-max-rows %d: the exact GP (Cholesky) is affordable", p.n, limit)
	}
	why := fmt.Sprintf("n = %d > exact-max-rows %d", p.n, limit)
	fits, gl := autoGLFits(spec, p, ext, maxFeatures)
	if fits {
		return "gl", why + ", " + gl
	}
	if p.n <= cgMax {
		return "cg", why + fmt.Sprintf(", %s and n <= cg-max-rows %d: the exact GP by conjugate gradients, O(J n^2 d) per step over the workers", gl, cgMax)
	}
	return "grief", why + fmt.Sprintf(", %s and n > cg-max-rows %d: GP-GRIEF, O(n p^2) per evaluation", gl, cgMax)
}

// autoGLFits reports whether auto takes gl: d <= AutoMaxGLDim and the Gauss-Legendre grid
// for the spec's bounds fits maxFeatures without raising the lower lengthscale bound
// (features.PlanGL), and says why in a clause of chooseMethod's reason.
func autoGLFits(spec Spec, p *prepared, ext []float64, maxFeatures int) (bool, string) {
	if p.d > AutoMaxGLDim {
		return false, fmt.Sprintf("d = %d > %d (a Gauss-Legendre grid grows as nodes^d)", p.d, AutoMaxGLDim)
	}
	fam, _ := kernel.ParseFamily(resolveKernel(spec.Kernel, "gl"))
	lmin, lmax := make([]float64, p.d), make([]float64, p.d)
	for k := range lmin {
		lmin[k], lmax[k] = spec.LengthscaleBounds[0], spec.LengthscaleBounds[1]
	}
	plan, err := features.PlanGL(fam, features.GLSizing{
		N: p.n, LengthscaleMin: lmin, LengthscaleMax: lmax,
		SignalVarianceMax: spec.SignalVarianceBounds[1], NoiseVarianceMin: spec.NoiseVarianceBounds[0],
		Range: ext, MaxFeatures: maxFeatures,
	})
	bounds := fmt.Sprintf("the Gauss-Legendre grid for the bounds %g,%g", spec.LengthscaleBounds[0], spec.LengthscaleBounds[1])
	switch {
	case err != nil:
		return false, fmt.Sprintf("%s does not fit max-features %d", bounds, maxFeatures)
	case plan.FloorRaised:
		return false, fmt.Sprintf("%s fits max-features %d only with a raised lower lengthscale bound", bounds, maxFeatures)
	}
	s := 1
	for _, v := range plan.Nodes {
		s *= v
	}
	return true, fmt.Sprintf("d = %d and %s fits: s = %d <= max-features %d", p.d, bounds, s, maxFeatures)
}

// AutoFallbackMethod is the method auto retrains with when its grief model is the all-noise
// fit although the exact GP on the sampled rows found signal (autoFallback).
const AutoFallbackMethod = "rff"

// autoFallback decides whether auto's model m, trained by method, is replaced: when grief ends
// at the all-noise optimum (model.WarnAllNoise) while the exact fit on the search's sampled
// rows (start) explains part of the target as signal, GP-GRIEF's eigenfunction basis (10 grid
// points per input, the p eigenfunctions of largest eigenvalue) cannot represent this target,
// and the data, not the likelihood, is what the all-noise answer reflects. Random Fourier
// features sample the kernel's whole spectrum and have no grid, so auto retrains with rff
// from the same start. (protein, split 0: grief's fit is the mean predictor, RMSE 0.7754;
// rff's 0.5348.) When the sampled exact fit is all-noise too, the all-noise model stands,
// flagged. It returns the method and why, or "" to keep m.
func autoFallback(method string, m *model.Model, start []float64) (fallback, why string) {
	if method != "grief" || len(start) == 0 || allNoise(start) || !m.HasWarning(model.WarnAllNoise) {
		return "", ""
	}
	return AutoFallbackMethod, fmt.Sprintf("grief's fit is all noise (noise variance %.0f%% of the target's) where the exact GP on the sampled rows ends at %.0f%%",
		100*m.Hyper.NoiseVariance, 100*math.Exp(start[len(start)-1]))
}

// trainAuto chooses the method (chooseMethod), trains it and, when its model is grief's
// all-noise fit where the sampled exact fit found signal (autoFallback), retrains with the
// fallback method from the same start. The choice depends only on the prepared statistics
// and the spec, and the fallback is kept in the checkpoint, so a resumed run trains the same
// method in the same phase.
func (r *run) trainAuto(ctx context.Context, eng engine.Engine, spec Spec, p *prepared) (*model.Model, error) {
	ext, err := glExtent(spec, p, p.lo, p.hi)
	if err != nil {
		return nil, err
	}
	method, reason := chooseMethod(spec, p, ext)
	autoSet := autoSettings(&spec)
	// spec.MaxIter stays auto's: DefaultMaxIter, the default of every method auto chooses
	// (none has its own Method.MaxIter); a method with its own would need it here.
	use := func(method string) {
		spec.Method, spec.Settings = method, chosenSettings(method, autoSet)
		r.spec.Method, r.spec.Settings = spec.Method, spec.Settings
	}
	use(method)
	choice := &model.MethodChoice{Requested: Auto, Reason: reason}
	r.obs(Event{Phase: "method", Message: fmt.Sprintf("auto chose %s: %s", method, reason)})
	if r.ck.Fallback == "" {
		m, err := r.trainWith(ctx, eng, spec, p)
		if err != nil {
			return nil, err
		}
		fb, why := autoFallback(method, m, r.ck.Start)
		if fb == "" {
			m.Choice = choice
			return m, nil
		}
		// The first choice's optimizer state goes; the start (the search's outcome on the
		// sampled rows) stays, and the fallback method polishes it on its own objective.
		r.ck.Fallback, r.ck.FallbackReason = fb, why
		r.ck.LBFGS, r.ck.Adam, r.ck.Trace, r.ck.Gram, r.ck.GL = nil, nil, nil, nil, nil
		r.ck.Phase = min(r.ck.Phase, phaseStarted)
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	use(r.ck.Fallback)
	choice.Reason = fmt.Sprintf("%s; then %s: retrained with %s", reason, r.ck.FallbackReason, r.ck.Fallback)
	r.obs(Event{Phase: "method", Message: fmt.Sprintf("auto: %s; retraining with %s", r.ck.FallbackReason, r.ck.Fallback)})
	m, err := r.trainWith(ctx, eng, spec, p)
	if err != nil {
		return nil, err
	}
	m.Choice = choice
	return m, nil
}

// isAuto reports whether the spec asks for the automatic method choice.
func (s *Spec) isAuto() bool { return s.Method == Auto }

// autoSettings is the spec's *pb.AutoSettings, or the defaults.
func autoSettings(s *Spec) *pb.AutoSettings {
	if a, ok := s.Settings.(*pb.AutoSettings); ok && a != nil {
		return a
	}
	return &pb.AutoSettings{}
}

// validateAuto checks the budgets of the automatic choice.
func validateAuto(s *Spec) error {
	return nonNegative(autoSettings(s))
}

// chosenSettings is the settings message of the method auto chose: a fresh message of that
// method with the auto settings it shares by name (exact_max_rows for exact and kmcg,
// max_features for gl, rff and grief).
func chosenSettings(method string, auto proto.Message) proto.Message {
	msg, _ := NewSettings(method)
	dst := msg.ProtoReflect()
	auto.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if to := dst.Descriptor().Fields().ByName(f.Name()); to != nil && to.Kind() == f.Kind() && !to.IsList() && !f.IsList() {
			dst.Set(to, v)
		}
		return true
	})
	return msg
}
