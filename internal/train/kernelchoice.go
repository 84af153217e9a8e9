package train

// The kernel family by the evidence, shared by the methods whose hyperparameters are the exact
// GP's (Method.ChoosesKernel: exact, cg, kmcg): the search with the SE kernel, then each
// candidate family fitted on the same sampled rows, the highest log marginal likelihood
// winning (Rasmussen & Williams 2006, §5.4.1).

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/optimizer"
)

// searchKernel runs the shared hyperparameter search (search.go, polished on min(n, sample)
// sampled rows) and settles the kernel family: the one spec names, or, with KernelAuto, the SE
// kernel for the search and then the family chosen by the evidence on the same rows
// (chooseKernel), written into spec.Kernel and r.spec.Kernel. It returns the family, the
// start of the method's own fit (its fitted theta on the sample) and the choice's sentence
// (empty when spec names the kernel).
func (r *run) searchKernel(ctx context.Context, eng engine.Engine, p *prepared, spec *Spec, lower, upper []float64, sample int) (kernel.Family, []float64, string, error) {
	auto := spec.Kernel == KernelAuto
	fam := kernel.RBF // the search runs with the SE kernel when the evidence chooses
	if !auto {
		var err error
		if fam, err = kernel.ParseFamily(spec.Kernel); err != nil {
			return 0, nil, "", fmt.Errorf("kernel: %w", err)
		}
	}
	x0, err := r.searchStartOn(ctx, eng, p, fam, lower, upper, sample)
	if err != nil || !auto {
		return fam, x0, "", err
	}
	fam, x0, why, err := r.chooseKernel(ctx, eng, p, x0, lower, upper, sample)
	if err != nil {
		return 0, nil, "", err
	}
	spec.Kernel = fam.String()
	r.spec.Kernel = spec.Kernel
	return fam, x0, why, nil
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
