package train

// The exact GP by Cholesky, exposed as a method: the reference every approximation is
// measured against. All rows are gathered to the coordinator, so it refuses more than
// exact_max_rows rows (ExactSettings; default DefaultExactMaxRows): each likelihood evaluation is an
// O(n^3) Cholesky plus an O(n^3) inverse for the gradient traces, and n^2 floats of memory.
// With the kernel setting KernelAuto (its default) it first chooses the kernel family by the
// evidence on the search's sampled rows (chooseKernel), then fits that family on all rows.

import (
	"context"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func init() {
	register(Method{
		Name:     "exact",
		Summary:  "the exact GP by Cholesky on the coordinator: O(n^3) per iteration, the reference",
		Settings: func() proto.Message { return &pb.ExactSettings{} },
		Tasks:    []string{"moments", "sample", "rows"},
		// The reference GP chooses its kernel by the evidence (chooseKernel).
		ChoosesKernel: true,
		validate:      func(s *Spec, _ int) error { return nonNegative(exactSettings(s)) },
		train: func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error) {
			return r.trainExact(ctx, eng, p)
		},
	})
}

// exactSettings is the spec's *pb.ExactSettings, or the defaults.
func exactSettings(s *Spec) *pb.ExactSettings {
	if g, ok := s.Settings.(*pb.ExactSettings); ok && g != nil {
		return g
	}
	return &pb.ExactSettings{}
}

func (r *run) trainExact(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	limit := orInt(int(exactSettings(&spec).GetExactMaxRows()), DefaultExactMaxRows)
	if p.n > limit {
		return nil, fmt.Errorf("exact: %d training rows exceed the exact method's limit of %d (exact-max-rows): its cost grows as n^3 and its memory as n^2; use --method gl or rff for large n, or raise --exact-max-rows", p.n, limit)
	}
	auto := spec.Kernel == KernelAuto
	fam := kernel.RBF // the search runs with the SE kernel when the evidence chooses
	if !auto {
		var err error
		if fam, err = kernel.ParseFamily(spec.Kernel); err != nil {
			return nil, fmt.Errorf("exact: kernel: %w", err)
		}
	}
	d := p.d
	obs(Event{Phase: "gather", Message: fmt.Sprintf("gathering %d rows", p.n)})
	st, err := eng.Reduce(ctx, &tasks.RowsTask{Transform: p.tf})
	if err != nil {
		return nil, fmt.Errorf("exact: gather rows: %w", err)
	}
	rows, ok := st.(*reduce.Rows)
	if !ok {
		return nil, fmt.Errorf("exact: gather returned %T", st)
	}
	lower, upper := box(spec, d)
	x0, err := r.searchStart(ctx, eng, p, fam, lower, upper)
	if err != nil {
		return nil, fmt.Errorf("exact: %w", err)
	}
	var kernelReason string
	if auto {
		if fam, x0, kernelReason, err = r.chooseKernel(ctx, eng, p, x0, lower, upper, startRows); err != nil {
			return nil, fmt.Errorf("exact: %w", err)
		}
		spec.Kernel = fam.String()
		r.spec.Kernel = spec.Kernel
	}
	prob := &exactProblem{fam: fam, d: d, x: rows.X, y: rows.Y}
	fit, err := r.optimize(ctx, prob.objective, x0, lower, upper, p, 0)
	if err != nil {
		return nil, fmt.Errorf("exact: %w", err)
	}
	obs(Event{Phase: "fit", Message: "posterior at the optimum"})
	e, err := prob.build(fit.theta)
	if err != nil {
		return nil, fmt.Errorf("exact: final fit: %w", err)
	}
	m := newModel(spec, p, fit, e.LogMarginalLikelihood())
	m.Posterior = &model.ExactPosterior{Exact: e.Predictor()}
	m.KernelReason = kernelReason
	r.warnFit(m, p, fit.theta, lower, upper, fit.reason)
	resid, variance, err := e.LOO()
	if err != nil {
		return nil, fmt.Errorf("exact: %w", err)
	}
	warnLOO(m, resid, variance)
	return m, nil
}

// exactProblem is the exact GP on standardized rows held in memory: its objective over
// theta = (log l, log sigma_f^2, log sigma_n^2) serves the exact method (with checkpoints,
// through run.optimize) and the shared hyperparameter search on a sample (search.go).
type exactProblem struct {
	fam  kernel.Family
	d    int
	x, y []float64
	// ws keeps the n x n buffers from one evaluation to the next: an Exact from build is
	// valid until the next build.
	ws solver.ExactWorkspace
}

func (e *exactProblem) build(theta []float64) (*solver.Exact, error) {
	h := hyperOf(theta, e.d)
	return solver.NewExactIn(&e.ws, kernel.Kernel{Family: e.fam, Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance}, h.NoiseVariance, e.x, e.d, e.y)
}

// objective is the negative log marginal likelihood and its gradient.
func (e *exactProblem) objective(theta, grad []float64) (float64, error) {
	ex, err := e.build(theta)
	if err != nil {
		return math.Inf(1), nil // not positive definite here: a failed step, not a failed job
	}
	for i, g := range ex.Gradient() {
		grad[i] = -g
	}
	return -ex.LogMarginalLikelihood(), nil
}

// kernelChoices are the families the evidence choice compares (chooseKernel), the papers'
// squared exponential first, which wins ties: the Matern kernels with nu = 5/2 and 3/2 are
// the rougher alternatives GP practice tries (Rasmussen & Williams 2006, §4.2.1, recommend
// them over the SE for physical processes; nu = 1/2 gives non-differentiable sample paths).
func kernelChoices() []kernel.Family {
	return []kernel.Family{kernel.RBF, kernel.Matern52, kernel.Matern32}
}

// chooseKernel chooses the kernel family of an exact fit by the evidence (Bayesian model
// selection: Rasmussen & Williams 2006, §5.4.1, the marginal likelihood of each model at its
// type-II maximum). x0 is the search's outcome with the SE kernel polished on the search's
// min(n, sample) sampled rows (all rows when n <= sample; sample is startRows for exact and
// cg, kmcgStartRows for kmcg). The SE kernel is polished
// from x0 on those rows by the same L-BFGS; each Matern family is polished from x0 and from
// the winner of its own restarts from the search's far starts (steps 3-4 of search.go with
// that family, on the same searchRows rows; the near starts lie in the SE fit's basin, which
// the polish from x0 covers), keeping the higher: a rougher kernel's best optimum need not
// lie in the SE kernel's basin. The family with the highest log marginal likelihood there wins
// (the SE kernel on ties). It returns the family, its fitted theta (the start of the method's
// own fit) and a sentence on the choice. The choice is kept in the checkpoint, so a resumed
// run trains the same family from the same start.
func (r *run) chooseKernel(ctx context.Context, eng engine.Engine, p *prepared, x0, lower, upper []float64, sample int) (kernel.Family, []float64, string, error) {
	if r.ck.Kernel != "" {
		fam, err := kernel.ParseFamily(r.ck.Kernel)
		if err != nil || len(r.ck.KernelStart) != len(x0) {
			return 0, nil, "", fmt.Errorf("kernel choice: the checkpoint holds kernel %q and a start of %d values", r.ck.Kernel, len(r.ck.KernelStart))
		}
		return fam, r.ck.KernelStart, r.ck.KernelReason, nil
	}
	smp, err := r.sampleProblem(ctx, eng, p, kernel.RBF, sample)
	if err != nil {
		return 0, nil, "", fmt.Errorf("kernel choice: %w", err)
	}
	rows := fmt.Sprintf("the %d sampled rows", len(smp.y))
	if len(smp.y) == p.n {
		rows = fmt.Sprintf("all %d training rows", p.n)
	}
	var names []string
	for _, fam := range kernelChoices() {
		names = append(names, fam.String())
	}
	r.obs(Event{Phase: "kernel", Message: fmt.Sprintf("choosing the kernel by the evidence on %s: %s", rows, strings.Join(names, ", "))})
	best, bestTheta, bestLML := kernel.RBF, x0, math.Inf(-1)
	var parts []string
	// The search's far starts (step 3 of search.go) depend on the sampled rows alone: the
	// same for every Matern family.
	search := smp.head(searchRows)
	far := searchStarts(medianLengthscales(search.x, len(search.y), search.d), lower, upper, r.spec.Seed)[searchNearStarts:]
	for _, fam := range kernelChoices() {
		prob := &exactProblem{fam: fam, d: smp.d, x: smp.x, y: smp.y}
		// Every family, the SE's too, is polished by the same L-BFGS, so that each likelihood
		// is at its own optimum (the search polishes only when n > searchRows). The search's
		// tolerance suffices: a relative 1e-6 of a likelihood is far below the nats that
		// separate the families, and the method's own fit then converges to fitFuncTol.
		starts := [][]float64{x0}
		if fam != kernel.RBF {
			own, err := familyRestarts(ctx, prob, far, lower, upper)
			if err != nil {
				return 0, nil, "", fmt.Errorf("kernel choice: %s: %w", fam, err)
			}
			if own != nil {
				starts = append(starts, own)
			}
		}
		var st *optimizer.LBFGSState
		for _, s0 := range starts {
			cand, err := optimizer.NewLBFGSState(s0, lower, upper)
			if err != nil {
				return 0, nil, "", fmt.Errorf("kernel choice: %w", err)
			}
			if err := optimizer.MinimizeLBFGSB(ctx, prob.objective, cand, lower, upper, optimizer.LBFGSSettings{MaxIter: r.spec.maxIter(), FuncTol: searchFuncTol, GradTol: fitGradTol}, nil); err != nil {
				return 0, nil, "", fmt.Errorf("kernel choice: %s fit on %s: %w", fam, rows, err)
			}
			// The first start wins ties, so a family whose own restarts find nothing better
			// keeps the polish from the SE kernel's optimum.
			if st == nil || cand.F < st.F {
				st = cand
			}
		}
		// st.F is the objective at st.X: the likelihood needs no second factorization.
		theta, lml := st.X, -st.F
		if math.IsInf(lml, -1) || math.IsNaN(lml) {
			parts = append(parts, fmt.Sprintf("%s not positive definite", fam))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", fam, lml))
		r.obs(Event{Phase: "kernel", Message: fmt.Sprintf("%s: log marginal likelihood %.4g on %s", fam, lml, rows)})
		if lml > bestLML {
			best, bestTheta, bestLML = fam, append([]float64(nil), theta...), lml
		}
	}
	if math.IsInf(bestLML, -1) {
		return 0, nil, "", fmt.Errorf("kernel choice: no family's likelihood is finite on %s", rows)
	}
	why := fmt.Sprintf("%s: the highest log marginal likelihood on %s (%s), each family at its own fitted hyperparameters", best, rows, strings.Join(parts, ", "))
	r.obs(Event{Phase: "kernel", Message: "chose " + why})
	r.ck.Kernel, r.ck.KernelStart, r.ck.KernelReason = best.String(), bestTheta, why
	return best, bestTheta, why, r.save(ctx)
}

// familyRestarts runs a restart (search.go's restart: box-constrained L-BFGS for at most
// searchIters iterations) from each of starts on the first searchRows rows of prob, with
// prob's kernel family, and returns the winner by the all-noise rule (step 4), or nil when no
// start's likelihood is finite.
func familyRestarts(ctx context.Context, prob *exactProblem, starts [][]float64, lower, upper []float64) ([]float64, error) {
	sub := prob.head(searchRows)
	rs := make([]Restart, 0, len(starts))
	for _, x := range starts {
		res, err := sub.restart(ctx, x, lower, upper)
		if err != nil {
			return nil, err
		}
		rs = append(rs, res)
	}
	return pickRestart(rs), nil
}
