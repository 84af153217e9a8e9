package train

import (
	"fmt"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
)

// Auto is the method name that lets Run choose the method from the data (chooseMethod).
const Auto = "auto"

// MethodNames returns the names of the training methods, sorted ("auto", the default
// choice, is not a method). It is the list the CLI completes --method with; the method
// registry (train.Methods) replaces it.
func MethodNames() []string { return []string{"cg", "exact", "gl", "grief", "kmcg", "rff"} }

// AutoMaxGLDim is the largest input dimension for which auto considers gl: the tensor grid
// has prod_k s_k features, exponential in d (digest 000 §6).
const AutoMaxGLDim = 3

// chooseMethod picks the method for Spec.Method == "auto" from the row count n, the input
// dimension d and the budgets, and says why:
//
//   - exact when n <= exact-max-rows: the reference itself, O(n^3) per iteration;
//   - gl when d <= AutoMaxGLDim and the Gauss-Legendre grid for the requested bounds fits
//     max-features without raising the lower lengthscale bound (features.PlanGL may lower the
//     resolution or cap an upper bound where the kernel is flat): one pass over the data,
//     then O(s^3) per iteration independent of n;
//   - grief otherwise: one pass, then O(p) per iteration, for any d.
//
// cg and kmcg are never chosen automatically: an iteration costs O(J n^2 d) over the workers
// (hours for 10^4-10^5 rows in pure Go), so they run only when asked for.
func chooseMethod(spec Spec, p *prepared, ext []float64) (method, reason string) {
	limit := spec.ExactMaxRows
	if limit == 0 {
		limit = DefaultExactMaxRows
	}
	if p.n <= limit {
		return "exact", fmt.Sprintf("n = %d <= exact-max-rows %d: the exact GP (Cholesky) is affordable", p.n, limit)
	}
	why := fmt.Sprintf("n = %d > exact-max-rows %d", p.n, limit)
	if p.d > AutoMaxGLDim {
		return "grief", why + fmt.Sprintf(" and d = %d > %d (a Gauss-Legendre grid grows as nodes^d): GP-GRIEF, O(p) per iteration after one pass", p.d, AutoMaxGLDim)
	}
	fam, _ := kernel.ParseFamily(spec.Kernel)
	lmin, lmax := make([]float64, p.d), make([]float64, p.d)
	for k := range lmin {
		lmin[k], lmax[k] = spec.LengthscaleBounds[0], spec.LengthscaleBounds[1]
	}
	plan, err := features.PlanGL(fam, features.GLSizing{
		N: p.n, LengthscaleMin: lmin, LengthscaleMax: lmax,
		SignalVarianceMax: spec.SignalVarianceBounds[1], NoiseVarianceMin: spec.NoiseVarianceBounds[0],
		Range: ext, MaxFeatures: spec.maxFeatures(), U: spec.GLBox, NodesPerDim: spec.NodesPerDim,
	})
	if err == nil && !plan.FloorRaised {
		s := 1
		for _, v := range plan.Nodes {
			s *= v
		}
		return "gl", why + fmt.Sprintf(", d = %d and the Gauss-Legendre grid for the bounds fits: s = %d <= max-features %d", p.d, s, spec.maxFeatures())
	}
	need := "does not fit max-features"
	if err == nil {
		need = fmt.Sprintf("fits max-features %d only with a raised lower lengthscale bound", spec.maxFeatures())
	}
	return "grief", why + fmt.Sprintf(" and the Gauss-Legendre grid for the bounds %g,%g %s: GP-GRIEF, O(p) per iteration after one pass", spec.LengthscaleBounds[0], spec.LengthscaleBounds[1], need)
}

// isAuto reports whether the spec asks for the automatic method choice.
func (s *Spec) isAuto() bool { return s.Method == Auto }
