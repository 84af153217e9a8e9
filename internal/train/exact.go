package train

// The exact GP by Cholesky, exposed as a method: the reference every approximation is
// measured against. All rows are gathered to the coordinator, so it refuses more than
// exact_max_rows rows (ExactSettings; default DefaultExactMaxRows): each likelihood evaluation is an
// O(n^3) Cholesky plus an O(n^3) inverse for the gradient traces, and n^2 floats of memory.
// With the kernel setting KernelAuto (its default) it first chooses the kernel family by the
// evidence on the search's sampled rows (searchKernel, kernelchoice.go), checks that choice on
// all rows when the sample was smaller (kernelOnAllRows), then fits that family on all rows.

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
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
	fam, x0, kernelReason, err := r.searchKernel(ctx, eng, p, &spec, lower, upper, startRows)
	if err != nil {
		return nil, fmt.Errorf("exact: %w", err)
	}
	prob := &exactProblem{fam: fam, d: d, x: rows.X, y: rows.Y}
	// A family the evidence chose on sampled rows, checked on all rows.
	if fam, x0, kernelReason, err = r.kernelOnAllRows(ctx, &spec, p.n, startRows, fam, x0, kernelReason, prob.allRowsLML); err != nil {
		return nil, fmt.Errorf("exact: %w", err)
	}
	prob.fam = fam
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
	warnLOO(m, resid, variance, "")
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

// allRowsLML is exact's value for kernelOnAllRows: the log marginal likelihood on the
// problem's rows with family f at theta (standard error 0), -Inf where K_hat is not positive
// definite (that family loses). It leaves the problem's family at f.
func (e *exactProblem) allRowsLML(f kernel.Family, theta []float64) (float64, float64, error) {
	e.fam = f
	ex, err := e.build(theta)
	if err != nil {
		return math.Inf(-1), 0, nil
	}
	return ex.LogMarginalLikelihood(), 0, nil
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
