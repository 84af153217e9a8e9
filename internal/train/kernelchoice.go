package train

// The kernel family by the evidence, shared by the methods whose hyperparameters are the exact
// GP's (Method.ChoosesKernel: exact, cg, kmcg): the search with the SE kernel, then each
// candidate family fitted on the same sampled rows, the highest log marginal likelihood
// winning (Rasmussen & Williams 2006, §5.4.1); exact, cg and kmcg then check that choice on all
// rows when the sample was smaller (kernelOnAllRows).

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

// KernelFit is one kernel family's fit on the sampled rows of the kernel choice: the family's
// name and its fitted log-hyperparameters.
type KernelFit struct {
	Family string
	Theta  []float64
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
	r.ck.KernelFits = nil
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
		r.ck.KernelFits = append(r.ck.KernelFits, KernelFit{Family: fam.String(), Theta: append([]float64(nil), theta...)})
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

// kernelOnAllRows checks a kernel choice the evidence made on sampled rows (n above the
// sample's size) on all n rows: the evidence of R&W §5.4.1 is the likelihood of all the
// data, and the sample can miss what all rows say (on elevators split 0 the 1000 sampled rows
// prefer the SE kernel by 4 and 9 nats while all rows, after cg's 50 Adam steps, prefer
// Matern 5/2 and 3/2 by 71 and 138). Each family's log marginal likelihood on all rows is
// taken at its own fit on the sample (r.ck.KernelFits) by lml (exact: the Cholesky value with
// se = 0; cg: the posterior's PCG solve with SLQ and its standard error; kmcg: the value it
// reports, one or the other by exact-max-rows), a lower bound on
// that family's optimum on all rows. Another family replaces the sample's choice fam only
// when its value is higher by more than two standard errors of the difference (the errors
// added in quadrature; for exact values, when it is higher); it then starts the method's fit
// from its own fit on the sample. The outcome is kept in the checkpoint, so a resumed run
// trains the same family, and written into spec.Kernel and r.spec.Kernel. It costs one
// likelihood evaluation per family. Without sampled fits (the spec names the kernel) or when
// the sample held all n rows, it returns fam, x0 and why as they are.
func (r *run) kernelOnAllRows(ctx context.Context, spec *Spec, n, sample int, fam kernel.Family, x0 []float64, why string, lml func(kernel.Family, []float64) (float64, float64, error)) (kernel.Family, []float64, string, error) {
	if len(r.ck.KernelFits) == 0 || n <= sample {
		return fam, x0, why, nil // the spec named the kernel, or the sample was all rows
	}
	if r.ck.KernelAllRows {
		f, err := kernel.ParseFamily(r.ck.Kernel)
		if err != nil {
			return 0, nil, "", fmt.Errorf("kernel choice on all rows: checkpoint: %w", err)
		}
		spec.Kernel, r.spec.Kernel = f.String(), f.String()
		return f, r.ck.KernelStart, r.ck.KernelReason, nil
	}
	type estimate struct {
		fam     kernel.Family
		theta   []float64
		lml, se float64
	}
	r.obs(Event{Phase: "kernel", Message: fmt.Sprintf("checking the choice on all %d training rows: each family's log marginal likelihood at its fit on the sampled rows", n)})
	var ests []estimate
	chosen := -1
	for _, f := range r.ck.KernelFits {
		ff, err := kernel.ParseFamily(f.Family)
		if err != nil {
			return 0, nil, "", fmt.Errorf("kernel choice on all rows: %w", err)
		}
		v, se, err := lml(ff, f.Theta)
		if err != nil {
			return 0, nil, "", fmt.Errorf("kernel choice on all rows: %s: %w", ff, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			r.obs(Event{Phase: "kernel", Message: fmt.Sprintf("%s: log marginal likelihood not finite on all %d training rows", ff, n)})
			continue
		}
		msg := fmt.Sprintf("%s: log marginal likelihood %.6g on all %d training rows", ff, v, n)
		if se > 0 {
			msg = fmt.Sprintf("%s: log marginal likelihood %.6g ± %.2g on all %d training rows", ff, v, se, n)
		}
		r.obs(Event{Phase: "kernel", Message: msg})
		if ff == fam {
			chosen = len(ests)
		}
		ests = append(ests, estimate{fam: ff, theta: f.Theta, lml: v, se: se})
	}
	out, start, reason := fam, x0, why
	if chosen >= 0 {
		best := chosen
		for i, e := range ests {
			c := ests[chosen]
			if e.lml-c.lml > 2*math.Hypot(e.se, c.se) && e.lml > ests[best].lml {
				best = i
			}
		}
		parts := make([]string, len(ests))
		for i, e := range ests {
			parts[i] = fmt.Sprintf("%s %.2f", e.fam, e.lml)
			if e.se > 0 {
				parts[i] = fmt.Sprintf("%s %.1f ± %.1f", e.fam, e.lml, e.se)
			}
		}
		all := strings.Join(parts, ", ")
		keep, over := " by two standard errors", ", by more than two standard errors,"
		if ests[chosen].se == 0 { // exact values
			keep, over = "", ""
		}
		if best == chosen {
			reason = fmt.Sprintf("%s; on all %d training rows at each family's sampled fit: %s (no other family higher%s)", why, n, all, keep)
		} else {
			b := ests[best]
			out, start = b.fam, b.theta
			reason = fmt.Sprintf("%s: the highest log marginal likelihood on all %d training rows at each family's fit on the sampled rows (%s)%s over %s, which the sampled rows preferred (%s)", b.fam, n, all, over, fam, why)
		}
	}
	r.obs(Event{Phase: "kernel", Message: "chose " + reason})
	r.ck.Kernel, r.ck.KernelStart, r.ck.KernelReason, r.ck.KernelAllRows = out.String(), start, reason, true
	spec.Kernel, r.spec.Kernel = out.String(), out.String()
	return out, start, reason, r.save(ctx)
}
