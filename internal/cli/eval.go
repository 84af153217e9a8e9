package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
)

// dataFlags selects the training and test data.
type dataFlags struct {
	uci      string
	split    int
	trainCSV string
	testCSV  string
	data     string
	testTail float64
	header   bool
	target   string
	columns  string
	// trainRows > 0 keeps a random sample of that many training rows (the same sample for
	// every method and seed), for quick comparisons on large datasets.
	trainRows int
}

// trainRowsStream seeds the --train-rows sample.
const trainRowsStream = 0x74726f7773

func (f *dataFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.uci, "uci", "", "UCI dataset directory (data.csv.gz and test_mask.csv.gz)")
	fl.IntVar(&f.split, "split", 0, "split 0-9 of the UCI dataset")
	fl.StringVar(&f.trainCSV, "train", "", "training CSV file (.csv or .csv.gz)")
	fl.StringVar(&f.testCSV, "test", "", "test CSV file")
	fl.StringVar(&f.data, "data", "", "one CSV file split into a training head and a test tail (see --test-tail)")
	fl.Float64Var(&f.testTail, "test-tail", 0.1, "with --data: the share of rows, taken from the end, held out for testing")
	fl.BoolVar(&f.header, "header", false, "the CSV files have a header line")
	fl.StringVar(&f.target, "target", "", "target column: header name or 0-based index (default: the last column)")
	fl.StringVar(&f.columns, "columns", "", "input columns, comma-separated names or 0-based indices (default: all but the target)")
	fl.IntVar(&f.trainRows, "train-rows", 0, "train on a fixed random sample of this many training rows, the same for every method (0: all); the test rows are unchanged")
}

// load reads the data and applies --train-rows.
func (f *dataFlags) load() (tr, te *shard.Table, err error) {
	if f.trainRows < 0 {
		return nil, nil, fmt.Errorf("--train-rows %d: give a positive number of rows, or 0 for all", f.trainRows)
	}
	if tr, te, err = f.read(); err != nil {
		return nil, nil, err
	}
	if f.trainRows > 0 && f.trainRows < tr.N() {
		tr = sampleRows(tr, f.trainRows)
	}
	return tr, te, nil
}

// sampleRows returns k rows of t drawn without replacement by a fixed stream, in file order.
func sampleRows(t *shard.Table, k int) *shard.Table {
	idx := rand.New(rand.NewPCG(trainRowsStream, 0)).Perm(t.N())[:k]
	slices.Sort(idx)
	out := &shard.Table{Source: t.Source, Columns: t.Columns, Target: t.Target, D: t.D, X: make([]float64, 0, k*t.D), Y: make([]float64, 0, k)}
	for _, i := range idx {
		out.X = append(out.X, t.Row(i)...)
		out.Y = append(out.Y, t.Y[i])
	}
	return out
}

func (f *dataFlags) read() (tr, te *shard.Table, err error) {
	opts := shard.CSVOptions{Header: f.header, Target: f.target}
	if f.columns != "" {
		opts.Columns = strings.Split(f.columns, ",")
	}
	sources := 0
	for _, s := range []string{f.uci, f.trainCSV + f.testCSV, f.data} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return nil, nil, fmt.Errorf("give exactly one data source: --uci DIR --split K, --train F --test F, or --data F --test-tail FRAC")
	}
	switch {
	case f.uci != "":
		return shard.LoadUCI(f.uci, f.split)
	case f.data != "":
		if !(f.testTail > 0 && f.testTail < 1) {
			return nil, nil, fmt.Errorf("--test-tail %g: must be between 0 and 1", f.testTail)
		}
		all, err := shard.LoadCSV(f.data, opts)
		if err != nil {
			return nil, nil, err
		}
		cut := all.N() - int(math.Round(f.testTail*float64(all.N())))
		if cut < 2 || cut >= all.N() {
			return nil, nil, fmt.Errorf("--test-tail %g leaves %d training and %d test rows of %d; both need rows", f.testTail, cut, all.N()-cut, all.N())
		}
		return all.Slice(0, cut), all.Slice(cut, all.N()), nil
	default:
		if f.trainCSV == "" || f.testCSV == "" {
			return nil, nil, fmt.Errorf("--train and --test go together")
		}
		if tr, err = shard.LoadCSV(f.trainCSV, opts); err != nil {
			return nil, nil, err
		}
		if te, err = shard.LoadCSV(f.testCSV, opts); err != nil {
			return nil, nil, err
		}
		if te.D != tr.D {
			return nil, nil, fmt.Errorf("%s has %d input columns but %s has %d", f.testCSV, te.D, f.trainCSV, tr.D)
		}
		return tr, te, nil
	}
}

// specFlags are the method settings shared by eval and, later, submit.
type specFlags struct {
	method, kernel             string
	seed                       uint64
	ls, sf2, sn2               string
	maxIter, features, maxFeat int
	nodes, glBox               string
	exactMax                   int
	inference                  string
	grid, eigenfunctions       int
	samples                    int
	truncation                 string
	cgIters, rrMin, probes     int
	precondRank, subset        int
	varianceRank               int
	rrRate, learningRate       float64
	cgTol                      float64
}

func (f *specFlags) register(cmd *cobra.Command, defMethod string) {
	fl := cmd.Flags()
	fl.StringVar(&f.method, "method", defMethod, "training method: gl, rff, exact, grief, cg or kmcg")
	fl.StringVar(&f.kernel, "kernel", "rbf", "kernel: rbf, matern12, matern32, matern52")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of every random draw (rff frequencies, grief subsample and MALA chain, cg probes and truncation lengths, kmcg subset)")
	fl.StringVar(&f.ls, "lengthscale-bounds", "", "LO,HI bounds on lengthscales, standardized units (default 0.05,100)")
	fl.StringVar(&f.sf2, "signal-variance-bounds", "", "LO,HI bounds on the signal variance, standardized units (default 0.05,20)")
	fl.StringVar(&f.sn2, "noise-variance-bounds", "", "LO,HI bounds on the noise variance, standardized units (default 1e-4,2)")
	fl.IntVar(&f.maxIter, "max-iter", train.DefaultMaxIter, "optimizer iterations at most")
	fl.IntVar(&f.features, "features", 0, fmt.Sprintf("rff: number of features, even (default %d)", train.DefaultRFFFeatures))
	fl.IntVar(&f.maxFeat, "max-features", train.DefaultMaxFeatures, "gl, rff: refuse more features than this")
	fl.StringVar(&f.nodes, "nodes-per-dim", "", "gl: quadrature nodes per input column, comma-separated (default: automatic)")
	fl.StringVar(&f.glBox, "gl-box", "", "gl: frequency box half-widths U per input column, comma-separated (default: automatic)")
	fl.IntVar(&f.exactMax, "exact-max-rows", train.DefaultExactMaxRows, "exact: refuse more training rows than this")
	fl.StringVar(&f.inference, "inference", "", "grief: type2 (GRIEF-II: theta and noise by maximum marginal likelihood with w = 1; default), type1 (MALA over the weights and noise) or type2-weights (maximum likelihood over the weights and noise; log likelihood not comparable)")
	fl.IntVar(&f.grid, "grid", 0, fmt.Sprintf("grief: inducing grid points per input column, m_bar (default %d)", train.DefaultGRIEFGrid))
	fl.IntVar(&f.eigenfunctions, "eigenfunctions", 0, fmt.Sprintf("grief: number of eigenfunctions p (default type2: min(1000, 10^floor(log10 n)); type1, type2-weights: %d; at most the grid size)", train.DefaultGRIEFEigenfunctions))
	fl.IntVar(&f.samples, "samples", 0, fmt.Sprintf("grief type1: retained MALA samples (default %d: 10000 iterations, burn-in 1000, thinning 50)", train.DefaultGRIEFSamples))
	fl.StringVar(&f.truncation, "truncation", "", "cg: truncation of each CG solve, fixed (J = --cg-iters iterations; default) or rr (Russian roulette: random J, unbiased)")
	fl.IntVar(&f.cgIters, "cg-iters", 0, fmt.Sprintf("cg fixed: CG iterations J per solve; kmcg: most search directions P (default %d)", train.DefaultCGIters))
	fl.IntVar(&f.rrMin, "rr-min", 0, fmt.Sprintf("cg --truncation rr: iterations J_min every solve runs (default %d)", train.DefaultRRMin))
	fl.Float64Var(&f.rrRate, "rr-rate", 0, fmt.Sprintf("cg --truncation rr: rate lambda of P(J) ~ exp(-lambda J) beyond J_min (default %g)", train.DefaultRRRate))
	fl.IntVar(&f.probes, "probes", 0, fmt.Sprintf("cg: Hutchinson probe vectors t for the log-determinant terms (default %d)", train.DefaultProbes))
	fl.IntVar(&f.precondRank, "precond-rank", 0, fmt.Sprintf("cg: rank k of the pivoted-Cholesky preconditioner, -1 for none (default %d)", train.DefaultPrecondRank))
	fl.Float64Var(&f.learningRate, "learning-rate", 0, fmt.Sprintf("cg: Adam base learning rate, decayed x0.1 at 50%%, 70%% and 90%% of the steps (default %g)", train.DefaultCGLearningRate))
	fl.Float64Var(&f.cgTol, "cg-tol", 0, fmt.Sprintf("cg: relative residual of the prediction solve (default %g); kmcg: stop CG when ||r|| <= tol ||y_M|| (default %g)", train.DefaultCGPredictTol, train.DefaultKMCGTol))
	fl.IntVar(&f.subset, "subset", 0, "kmcg: number M of inducing inputs taken from the training rows (default: all rows)")
	fl.IntVar(&f.varianceRank, "variance-rank", 0, fmt.Sprintf("cg: rank of the Lanczos predictive-variance cache (default %d)", train.DefaultVarianceRank))
}

func (f *specFlags) spec() (train.Spec, error) {
	s := train.DefaultSpec(f.method)
	s.Kernel, s.Seed, s.MaxIter, s.Features, s.MaxFeatures, s.ExactMaxRows = f.kernel, f.seed, f.maxIter, f.features, f.maxFeat, f.exactMax
	s.Inference, s.Grid, s.Eigenfunctions, s.Samples = f.inference, f.grid, f.eigenfunctions, f.samples
	s.Truncation, s.CGIters, s.RRMin, s.RRRate, s.Probes = f.truncation, f.cgIters, f.rrMin, f.rrRate, f.probes
	s.PrecondRank, s.LearningRate, s.CGTol, s.Subset, s.VarianceRank = f.precondRank, f.learningRate, f.cgTol, f.subset, f.varianceRank
	for _, b := range []struct {
		flag string
		val  string
		dst  *[2]float64
	}{{"--lengthscale-bounds", f.ls, &s.LengthscaleBounds}, {"--signal-variance-bounds", f.sf2, &s.SignalVarianceBounds}, {"--noise-variance-bounds", f.sn2, &s.NoiseVarianceBounds}} {
		if b.val == "" {
			continue
		}
		v, err := parseFloats(b.flag, b.val)
		if err != nil {
			return s, err
		}
		if len(v) != 2 {
			return s, fmt.Errorf("%s %q: give two numbers LO,HI", b.flag, b.val)
		}
		*b.dst = [2]float64{v[0], v[1]}
	}
	if f.nodes != "" {
		v, err := parseFloats("--nodes-per-dim", f.nodes)
		if err != nil {
			return s, err
		}
		for _, x := range v {
			if x != math.Trunc(x) || x < 1 || x > 1<<20 {
				return s, fmt.Errorf("--nodes-per-dim %q: %g is not a whole number of nodes", f.nodes, x)
			}
			s.NodesPerDim = append(s.NodesPerDim, int(x))
		}
	}
	if f.glBox != "" {
		v, err := parseFloats("--gl-box", f.glBox)
		if err != nil {
			return s, err
		}
		s.GLBox = v
	}
	return s, nil
}

func parseFloats(flag, s string) ([]float64, error) {
	var out []float64
	for i, part := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s %q: item %d (%q) is not a finite number", flag, s, i+1, part)
		}
		out = append(out, v)
	}
	return out, nil
}

// runFlags control how a job runs locally.
type runFlags struct {
	shards, workers int
}

func (f *runFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.shards, "shards", 0, fmt.Sprintf("number of shards (fixed per job; default: one per %d rows)", rowsPerShard))
	cmd.Flags().IntVar(&f.workers, "workers", runtime.NumCPU(), "goroutines running shard tasks (never changes the result)")
}

// rowsPerShard sets the default shard count, which depends only on the row count.
const rowsPerShard = 1 << 16

// localEngine cuts tr into the job's fixed shards and returns a local engine over them.
func (f *runFlags) localEngine(tr *shard.Table) (*engine.Local, error) {
	if f.shards < 0 {
		return nil, fmt.Errorf("--shards %d: must be positive", f.shards)
	}
	k := f.shards
	if k == 0 {
		k = (tr.N() + rowsPerShard - 1) / rowsPerShard
	}
	refs, tabs := shard.PartitionCount(tr, k)
	return engine.NewLocal(refs, tabs, f.workers)
}

// evalResult is what eval prints; with --json exactly these fields.
type evalResult struct {
	Method   string  `json:"method"`
	Kernel   string  `json:"kernel"`
	NTrain   int     `json:"n_train"`
	NTest    int     `json:"n_test"`
	D        int     `json:"d"`
	Shards   int     `json:"shards"`
	Workers  int     `json:"workers"`
	Features int     `json:"features,omitempty"`
	RMSE     float64 `json:"rmse"`
	NLL      float64 `json:"nll"`
	// The same two scores for the target standardized by the training rows' mean and
	// standard deviation, the units most GP papers report (RMSE / s, NLL - log s).
	RMSEStd         float64     `json:"rmse_standardized"`
	NLLStd          float64     `json:"nll_standardized"`
	Coverage95      float64     `json:"coverage95"`
	TrainSeconds    float64     `json:"train_seconds"`
	PredictSeconds  float64     `json:"predict_seconds"`
	Iterations      int         `json:"iterations"`
	LogLikelihood   float64     `json:"log_likelihood"`
	Hyperparameters hyperResult `json:"hyperparameters"`
	ModelPath       string      `json:"model_path,omitempty"`
}

type hyperResult struct {
	Lengthscales   []float64 `json:"lengthscales"`
	SignalVariance float64   `json:"signal_variance"`
	NoiseVariance  float64   `json:"noise_variance"`
}

// evaluate trains spec on tr with the local engine and scores the model on te.
func evaluate(ctx context.Context, spec train.Spec, tr, te *shard.Table, rf runFlags, obs train.Observer) (*evalResult, *model.Model, error) {
	eng, err := rf.localEngine(tr)
	if err != nil {
		return nil, nil, err
	}
	spec.Columns, spec.Target = tr.Columns, tr.Target
	t0 := time.Now()
	m, err := train.Train(ctx, eng, spec, obs)
	if err != nil {
		return nil, nil, err
	}
	trainSec := time.Since(t0).Seconds()
	t1 := time.Now()
	pred, err := m.Predict(te.X, te.N())
	if err != nil {
		return nil, nil, err
	}
	predSec := time.Since(t1).Seconds()
	sc, err := model.Score(pred, te.Y)
	if err != nil {
		return nil, nil, err
	}
	h := m.Original()
	r := &evalResult{
		Method: m.Method, Kernel: m.Kernel, NTrain: tr.N(), NTest: te.N(), D: tr.D,
		Shards: len(eng.Shards()), Workers: rf.workers,
		RMSE: sc.RMSE, NLL: sc.NLL, Coverage95: sc.Coverage95, TrainSeconds: trainSec, PredictSeconds: predSec,
		Iterations: m.Iterations, LogLikelihood: m.LogLik,
		Hyperparameters: hyperResult{Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance, NoiseVariance: h.NoiseVariance},
	}
	r.RMSEStd, r.NLLStd = sc.RMSE/m.Transform.YScale, sc.NLL-math.Log(m.Transform.YScale)
	if m.Features != nil {
		r.Features = len(m.Features.Beta)
	}
	return r, m, nil
}

func newEvalCmd(e *env) *cobra.Command {
	var df dataFlags
	var sf specFlags
	var rf runFlags
	var asJSON bool
	var modelOut string
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Train a method on training data and report RMSE, NLL, 95% coverage and times on test data",
		Example: `  coordinator eval --method gl --uci ../shared/data/uci/yacht --split 0 --lengthscale-bounds 0.2,2
  coordinator eval --method exact --uci ../shared/data/uci/servo --split 3 --json
  coordinator eval --method gl --data maunaloa_co2.csv --header --test-tail 0.1
  coordinator eval --method cg --uci ../shared/data/uci/elevators --split 0 --truncation rr`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := sf.spec()
			if err != nil {
				return err
			}
			// Check the settings before reading the data; the checks that need the number of
			// input columns run in training.
			if err := checkSpec(spec, 0, flagNames); err != nil {
				return err
			}
			tr, te, err := df.load()
			if err != nil {
				return err
			}
			var obs train.Observer
			var pr *progress
			if !asJSON {
				pr = newProgress(e.errOut, e.tty)
				obs = pr.observe
			}
			r, m, err := evaluate(cmd.Context(), spec, tr, te, rf, obs)
			if pr != nil {
				pr.done()
			}
			if err != nil {
				return err
			}
			if modelOut != "" {
				if err := writeModel(modelOut, m); err != nil {
					return err
				}
				r.ModelPath = modelOut
			}
			if asJSON {
				enc := json.NewEncoder(e.out)
				return enc.Encode(r)
			}
			printResult(e, r)
			return nil
		},
	}
	df.register(cmd)
	sf.register(cmd, "gl")
	rf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&modelOut, "model-out", "", "also write the trained model to this file")
	return cmd
}

func printResult(e *env, r *evalResult) {
	w := e.out
	fmt.Fprintf(w, "method      %s (kernel %s", r.Method, r.Kernel)
	if r.Features > 0 {
		fmt.Fprintf(w, ", %d features", r.Features)
	}
	fmt.Fprintf(w, ")\n")
	fmt.Fprintf(w, "data        %d train, %d test rows, d = %d, %d shards\n", r.NTrain, r.NTest, r.D, r.Shards)
	fmt.Fprintf(w, "test RMSE   %.6g\n", r.RMSE)
	fmt.Fprintf(w, "test NLL    %.6g\n", r.NLL)
	fmt.Fprintf(w, "standardized target: RMSE %.6g, NLL %.6g\n", r.RMSEStd, r.NLLStd)
	fmt.Fprintf(w, "coverage95  %.3f\n", r.Coverage95)
	fmt.Fprintf(w, "lengthscale %s\n", fmtList(r.Hyperparameters.Lengthscales))
	fmt.Fprintf(w, "signal var  %.6g\n", r.Hyperparameters.SignalVariance)
	fmt.Fprintf(w, "noise var   %.6g\n", r.Hyperparameters.NoiseVariance)
	fmt.Fprintf(w, "train       %.2f s (%d iterations)   predict %.3f s\n", r.TrainSeconds, r.Iterations, r.PredictSeconds)
	if r.ModelPath != "" {
		fmt.Fprintf(w, "model       %s\n", r.ModelPath)
	}
}

func fmtList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'g', 6, 64)
	}
	return strings.Join(parts, " ")
}

// writeModel writes m to path atomically (temporary file, then rename), so a failed write
// never leaves a truncated model where a good one was.
func writeModel(path string, m *model.Model) error {
	b, err := m.Bytes()
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write model: %w", err)
	}
	return nil
}
