package train

import (
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// Spec is a training job's method and settings. Bounds are in standardized units: inputs
// and target are scaled to zero mean and unit variance by the training data's moments, so a
// lengthscale of 1 is one standard deviation of its input column and a noise variance of 0.1
// is a tenth of the target's variance.
type Spec struct {
	Method string `json:"method" yaml:"method"` // auto, gl, rff, exact, grief, cg or kmcg
	Kernel string `json:"kernel" yaml:"kernel"` // rbf, matern12, matern32, matern52
	Seed   uint64 `json:"seed" yaml:"seed"`

	// Names of the input columns and the target, recorded in the model (the CLI fills them
	// from the data).
	Columns []string `json:"columns,omitempty" yaml:"columns,omitempty"`
	Target  string   `json:"target,omitempty" yaml:"target,omitempty"`

	LengthscaleBounds    [2]float64 `json:"lengthscale_bounds" yaml:"lengthscale_bounds"`
	SignalVarianceBounds [2]float64 `json:"signal_variance_bounds" yaml:"signal_variance_bounds"`
	NoiseVarianceBounds  [2]float64 `json:"noise_variance_bounds" yaml:"noise_variance_bounds"`
	MaxIter              int        `json:"max_iter" yaml:"max_iter"`

	// Feature methods.
	Features    int       `json:"features,omitempty" yaml:"features,omitempty"`           // rff: number of real features s (even)
	NodesPerDim []int     `json:"nodes_per_dim,omitempty" yaml:"nodes_per_dim,omitempty"` // gl: override the automatic node counts
	GLBox       []float64 `json:"gl_box,omitempty" yaml:"gl_box,omitempty"`               // gl: override the box half-widths U
	MaxFeatures int       `json:"max_features,omitempty" yaml:"max_features,omitempty"`   // gl, rff: refuse more features than this
	// PredictMin and PredictMax bound the inputs the model will predict at, per input column
	// in original units (both or neither; eval sets them from its test rows): gl sizes its
	// grid so its domain covers them as well as the training inputs.
	PredictMin []float64 `json:"predict_min,omitempty" yaml:"predict_min,omitempty"`
	PredictMax []float64 `json:"predict_max,omitempty" yaml:"predict_max,omitempty"`

	// Exact.
	ExactMaxRows int `json:"exact_max_rows,omitempty" yaml:"exact_max_rows,omitempty"`

	// GP-GRIEF (digest 001).
	Inference      string `json:"inference,omitempty" yaml:"inference,omitempty"`           // type2 (default: GRIEF-II, theta and sigma^2 with w = 1), type1 (MALA over w, sigma^2) or type2-weights (maximum likelihood over w, sigma^2)
	Grid           int    `json:"grid,omitempty" yaml:"grid,omitempty"`                     // inducing points per dimension, m_bar (default DefaultGRIEFGrid)
	Eigenfunctions int    `json:"eigenfunctions,omitempty" yaml:"eigenfunctions,omitempty"` // p, the number of eigenfunctions (default: GP-GRIEF §4.3, see Spec.GRIEFEigenfunctions)
	Samples        int    `json:"samples,omitempty" yaml:"samples,omitempty"`               // type1: retained MALA samples (default DefaultGRIEFSamples)

	// Conjugate gradients: cg (BBMM-style training, digest 004) and kmcg (digest 003).
	Truncation   string  `json:"truncation,omitempty" yaml:"truncation,omitempty"`       // cg: fixed (default; J = cg_iters) or rr (Russian roulette)
	CGIters      int     `json:"cg_iters,omitempty" yaml:"cg_iters,omitempty"`           // cg fixed: J per solve; kmcg: most search directions P (default DefaultCGIters)
	RRMin        int     `json:"rr_min,omitempty" yaml:"rr_min,omitempty"`               // cg rr: J_min (default DefaultRRMin)
	RRRate       float64 `json:"rr_rate,omitempty" yaml:"rr_rate,omitempty"`             // cg rr: lambda of P(J) ~ exp(-lambda J) (default DefaultRRRate)
	Probes       int     `json:"probes,omitempty" yaml:"probes,omitempty"`               // cg: Hutchinson probes t (default DefaultProbes)
	PrecondRank  int     `json:"precond_rank,omitempty" yaml:"precond_rank,omitempty"`   // cg: pivoted-Cholesky rank k (default DefaultPrecondRank; -1 for none)
	LearningRate float64 `json:"learning_rate,omitempty" yaml:"learning_rate,omitempty"` // cg: Adam base rate (default DefaultCGLearningRate)
	CGTol        float64 `json:"cg_tol,omitempty" yaml:"cg_tol,omitempty"`               // cg: prediction solve tolerance (default 1e-4); kmcg: stop when ||r|| <= tol ||y_M|| (default 0.01)
	Subset       int     `json:"subset,omitempty" yaml:"subset,omitempty"`               // kmcg: M inducing inputs from the rows (default all)
	VarianceRank int     `json:"variance_rank,omitempty" yaml:"variance_rank,omitempty"` // cg, kmcg: fixed rank of the Lanczos variance cache (default: adaptive, see VarianceGapTol)
	KMCGNoise    string  `json:"kmcg_noise,omitempty" yaml:"kmcg_noise,omitempty"`       // kmcg: "start" (default: the sampled exact fit's noise) or "evidence" (refit by eq. 16)
}

// Defaults used when a Spec leaves a field at its zero value.
const (
	DefaultMaxIter      = 100
	DefaultRFFFeatures  = 512
	DefaultMaxFeatures  = 8192
	DefaultExactMaxRows = 5000

	DefaultGRIEFGrid           = 10   // m_bar, as in the paper's experiments
	DefaultGRIEFEigenfunctions = 1000 // p of type1 and type2-weights, as in the paper's GRIEF-I experiments; type2 takes min(1000, 10^floor(log10 n))
	DefaultGRIEFSamples        = 180  // (10000 - 1000) / 50: the paper's MALA run
	MaxGRIEFGrid               = 1024

	DefaultCGIters        = 100  // J of fixed CG and P of KMCG, as in the papers' experiments
	DefaultRRMin          = 80   // J_min of RR-CG: with lambda 0.05, E[J] ~= 100 (digest 004 §6)
	DefaultRRRate         = 0.05 // lambda of RR-CG: sd(J) ~= 20
	DefaultProbes         = 10   // Hutchinson probes (GPyTorch's num_trace_samples)
	DefaultPrecondRank    = 5    // pivoted-Cholesky rank (digest 004 §1.5)
	DefaultCGLearningRate = 0.05 // Adam base rate, decayed x0.1 at 50%, 70% and 90% of the steps
	DefaultCGPredictTol   = 1e-4 // relative residual of the prediction solve (digest 004 §6)
	DefaultKMCGTol        = 0.01 // KMCG stopping rule ||r|| <= 0.01 ||y_M|| (digest 003 §2.4)
	DefaultVarianceRank   = 100  // the adaptive variance cache may always grow to this rank (LOVE's rank, digest 004 §6)
	MaxCGPredictIters     = 1000 // cap on the prediction solve (digest 004 §6)
)

// Default hyperparameter bounds, standardized units (each input and the target scaled to unit
// variance by the training data).
//
// Lengthscales [0.05, 100]: the upper bound is 100 standard deviations of the input, at least
// 14 times the standardized range of any column with n <= 10^9 Gaussian rows (about 12 sd) and
// 29 times that of a uniform or binary column, so an irrelevant input can be switched off
// (its kernel factor then stays above exp(-1/200) across the data; ARD needs a lengthscale far
// above the spread, and the former bound of 2 could not reach it). The lower bound 0.05 is
// 1/20 of a standard deviation: on n <= 10^5 rows shorter lengthscales only fit noise, and
// it keeps the feature methods' frequency box finite (gl sizes its grid from these bounds).
// Signal variance [0.05, 20] and noise variance [1e-4, 2] bracket the target's unit variance.
var (
	DefaultLengthscaleBounds    = [2]float64{0.05, 100}
	DefaultSignalVarianceBounds = [2]float64{0.05, 20}
	DefaultNoiseVarianceBounds  = [2]float64{1e-4, 2}
)

// DefaultSpec returns the defaults for a method: kernel rbf, DefaultLengthscaleBounds,
// DefaultSignalVarianceBounds and DefaultNoiseVarianceBounds (standardized units).
func DefaultSpec(method string) Spec {
	return Spec{
		Method:               method,
		Kernel:               "rbf",
		LengthscaleBounds:    DefaultLengthscaleBounds,
		SignalVarianceBounds: DefaultSignalVarianceBounds,
		NoiseVarianceBounds:  DefaultNoiseVarianceBounds,
		MaxIter:              DefaultMaxIter,
	}
}

// Validate checks the spec up front and says which field to change. d is the number of
// input columns; d <= 0 skips the checks that need it.
func (s *Spec) Validate(d int) error {
	switch s.Method {
	case "gl", "rff", "exact", "grief", "cg", "kmcg":
	case Auto:
		for _, f := range []struct {
			name string
			set  bool
		}{{"nodes-per-dim", len(s.NodesPerDim) > 0}, {"gl-box", len(s.GLBox) > 0}, {"features", s.Features != 0}} {
			if f.set {
				return fmt.Errorf("%s: a setting of a particular method, but the method is auto (chosen from the data); give the method too, e.g. --method gl", f.name)
			}
		}
	case "":
		return fmt.Errorf("method: not set; use auto, gl, rff, exact, grief, cg or kmcg")
	default:
		return fmt.Errorf("method: unknown method %q; use auto, gl, rff, exact, grief, cg or kmcg", s.Method)
	}
	if _, err := kernel.ParseFamily(s.Kernel); err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	for _, b := range []struct {
		name string
		v    [2]float64
	}{{"lengthscale-bounds", s.LengthscaleBounds}, {"signal-variance-bounds", s.SignalVarianceBounds}, {"noise-variance-bounds", s.NoiseVarianceBounds}} {
		lo, hi := b.v[0], b.v[1]
		if !(lo > 0) || math.IsInf(hi, 0) || math.IsNaN(hi) {
			return fmt.Errorf("%s: %g,%g must be positive and finite", b.name, lo, hi)
		}
		if lo > hi {
			return fmt.Errorf("%s: lower bound %g is above upper bound %g; swap them", b.name, lo, hi)
		}
	}
	if s.MaxIter < 0 {
		return fmt.Errorf("max-iter: %d is negative", s.MaxIter)
	}
	if s.Method == "rff" && s.Features != 0 && (s.Features < 2 || s.Features%2 != 0) {
		return fmt.Errorf("features: rff needs an even number of features >= 2, got %d", s.Features)
	}
	if d > 0 && len(s.NodesPerDim) != 0 && len(s.NodesPerDim) != d {
		return fmt.Errorf("nodes-per-dim: %d values for %d input columns; give one per column", len(s.NodesPerDim), d)
	}
	for _, v := range s.NodesPerDim {
		if v < 1 {
			return fmt.Errorf("nodes-per-dim: %d must be at least 1", v)
		}
	}
	if d > 0 && len(s.GLBox) != 0 && len(s.GLBox) != d {
		return fmt.Errorf("gl-box: %d values for %d input columns; give one per column", len(s.GLBox), d)
	}
	for _, v := range s.GLBox {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("gl-box: %g must be positive and finite", v)
		}
	}
	if len(s.PredictMin) != len(s.PredictMax) || (d > 0 && len(s.PredictMin) != 0 && len(s.PredictMin) != d) {
		return fmt.Errorf("predict-range: %d minima and %d maxima for %d input columns; give one of each per column", len(s.PredictMin), len(s.PredictMax), d)
	}
	for k := range s.PredictMin {
		if !(s.PredictMin[k] <= s.PredictMax[k]) || math.IsInf(s.PredictMin[k], 0) || math.IsInf(s.PredictMax[k], 0) {
			return fmt.Errorf("predict-range: column %d has %g,%g; give finite LO <= HI", k, s.PredictMin[k], s.PredictMax[k])
		}
	}
	switch s.Inference {
	case "", "type1", "type2", "type2-weights":
	default:
		return fmt.Errorf("inference: unknown inference %q; use type2 (GRIEF-II: maximum marginal likelihood over theta and the noise), type1 (MALA over the weights and the noise) or type2-weights (maximum likelihood over the weights and the noise)", s.Inference)
	}
	if s.Inference != "" && s.Method != "grief" {
		return fmt.Errorf("inference: %q is a grief setting; drop it for method %s", s.Inference, s.Method)
	}
	if s.Grid < 0 || s.Grid > MaxGRIEFGrid {
		return fmt.Errorf("grid: %d points per dimension; give 1 to %d (or 0 for the default %d)", s.Grid, MaxGRIEFGrid, DefaultGRIEFGrid)
	}
	if s.Eigenfunctions < 0 {
		return fmt.Errorf("eigenfunctions: %d is negative; give a positive number (or 0 for the default %d)", s.Eigenfunctions, DefaultGRIEFEigenfunctions)
	}
	if s.Method == "grief" && s.griefP(0) > s.maxFeatures() {
		return fmt.Errorf("eigenfunctions: %d exceeds max-features %d (A = Phi^T Phi takes p^2 floats per shard); lower it or raise max-features", s.griefP(0), s.maxFeatures())
	}
	if s.Samples < 0 {
		return fmt.Errorf("samples: %d is negative; give a positive number (or 0 for the default %d)", s.Samples, DefaultGRIEFSamples)
	}
	if s.Samples > 0 && s.griefInference() != "type1" {
		return fmt.Errorf("samples: %d is a type1 (MALA) setting; drop it or set inference type1", s.Samples)
	}
	if s.Samples > 1e6 {
		return fmt.Errorf("samples: %d is more than 1e6; the chain would take %d iterations", s.Samples, s.Samples*griefThin)
	}
	return s.validateCG()
}

// validateCG checks the settings of the conjugate-gradient methods.
func (s *Spec) validateCG() error {
	cg, kmcg := s.Method == "cg", s.Method == "kmcg"
	onlyFor := func(field string, ok bool, methods string) error {
		if !ok {
			return fmt.Errorf("%s: a %s setting; drop it for method %s", field, methods, s.Method)
		}
		return nil
	}
	switch s.KMCGNoise {
	case "", "start", "evidence":
	default:
		return fmt.Errorf("kmcg-noise: unknown choice %q; use start (keep the sampled exact fit's noise) or evidence (refit by the KMCG evidence, eq. 16)", s.KMCGNoise)
	}
	switch s.Truncation {
	case "", "fixed", "rr":
	default:
		return fmt.Errorf("truncation: unknown truncation %q; use fixed (J = cg-iters) or rr (Russian roulette)", s.Truncation)
	}
	checks := []struct {
		field   string
		set     bool
		ok      bool
		methods string
	}{
		{"truncation", s.Truncation != "", cg, "cg"},
		{"cg-iters", s.CGIters != 0, cg || kmcg, "cg and kmcg"},
		{"rr-min", s.RRMin != 0, cg && s.Truncation == "rr", "cg --truncation rr"},
		{"rr-rate", s.RRRate != 0, cg && s.Truncation == "rr", "cg --truncation rr"},
		{"probes", s.Probes != 0, cg, "cg"},
		{"precond-rank", s.PrecondRank != 0, cg, "cg"},
		{"learning-rate", s.LearningRate != 0, cg, "cg"},
		{"cg-tol", s.CGTol != 0, cg || kmcg, "cg and kmcg"},
		{"subset", s.Subset != 0, kmcg, "kmcg"},
		{"variance-rank", s.VarianceRank != 0, cg || kmcg, "cg and kmcg"},
		{"kmcg-noise", s.KMCGNoise != "", kmcg, "kmcg"},
	}
	for _, c := range checks {
		if c.set {
			if err := onlyFor(c.field, c.ok, c.methods); err != nil {
				return err
			}
		}
	}
	switch {
	case s.CGIters < 0:
		return fmt.Errorf("cg-iters: %d is negative; give a positive number (or 0 for the default %d)", s.CGIters, DefaultCGIters)
	case s.RRMin < 0:
		return fmt.Errorf("rr-min: %d is negative; give J_min >= 1 (or 0 for the default %d)", s.RRMin, DefaultRRMin)
	case s.RRRate < 0 || math.IsNaN(s.RRRate) || math.IsInf(s.RRRate, 0):
		return fmt.Errorf("rr-rate: %g must be positive and finite (0.05 to 0.1 gives sd(J) of 20 to 10)", s.RRRate)
	case s.Probes < 0 || s.Probes > 1000:
		return fmt.Errorf("probes: %d; give 1 to 1000 (or 0 for the default %d)", s.Probes, DefaultProbes)
	case s.PrecondRank < -1:
		return fmt.Errorf("precond-rank: %d; give a rank >= 1, -1 for no preconditioner, or 0 for the default %d", s.PrecondRank, DefaultPrecondRank)
	case s.LearningRate < 0 || math.IsNaN(s.LearningRate) || math.IsInf(s.LearningRate, 0):
		return fmt.Errorf("learning-rate: %g must be positive and finite", s.LearningRate)
	case s.CGTol < 0 || s.CGTol >= 1 || math.IsNaN(s.CGTol):
		return fmt.Errorf("cg-tol: %g must lie in (0, 1)", s.CGTol)
	case s.Subset < 0:
		return fmt.Errorf("subset: %d is negative; give the number of inducing rows M (or 0 for all rows)", s.Subset)
	case s.VarianceRank < 0:
		return fmt.Errorf("variance-rank: %d is negative; give a positive rank (or 0 for the adaptive rank)", s.VarianceRank)
	}
	return nil
}

func (s *Spec) cgIters() int { return orInt(s.CGIters, DefaultCGIters) }
func (s *Spec) rrMin() int   { return orInt(s.RRMin, DefaultRRMin) }
func (s *Spec) probes() int  { return orInt(s.Probes, DefaultProbes) }
func (s *Spec) precondRank() int {
	switch s.PrecondRank {
	case 0:
		return DefaultPrecondRank
	case -1:
		return 0
	}
	return s.PrecondRank
}
func (s *Spec) rrRate() float64       { return orFloat(s.RRRate, DefaultRRRate) }
func (s *Spec) learningRate() float64 { return orFloat(s.LearningRate, DefaultCGLearningRate) }

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

func (s *Spec) griefInference() string {
	if s.Inference == "" {
		return "type2"
	}
	return s.Inference
}

func (s *Spec) griefGrid() int {
	if s.Grid == 0 {
		return DefaultGRIEFGrid
	}
	return s.Grid
}

// griefP is the number of eigenfunctions p for n training rows: the spec's, or GP-GRIEF
// §4.3's choice, p = min(1000, 10^floor(log10 n)) for type2 (GRIEF-II) and p = 1000 for the
// weight-learning variants. n <= 0 (not yet known) gives the largest p the spec can take.
func (s *Spec) griefP(n int) int {
	switch {
	case s.Eigenfunctions != 0:
		return s.Eigenfunctions
	case s.griefInference() != "type2" || n <= 0:
		return DefaultGRIEFEigenfunctions
	}
	p := 1
	for p*10 <= n && p < DefaultGRIEFEigenfunctions {
		p *= 10
	}
	return p
}

func (s *Spec) griefSamples() int {
	if s.Samples == 0 {
		return DefaultGRIEFSamples
	}
	return s.Samples
}

func (s *Spec) maxIter() int {
	if s.MaxIter == 0 {
		return DefaultMaxIter
	}
	return s.MaxIter
}

func (s *Spec) maxFeatures() int {
	if s.MaxFeatures == 0 {
		return DefaultMaxFeatures
	}
	return s.MaxFeatures
}
