package cli

import (
	"context"
	"fmt"
	"io"
	"math"
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
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
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

// load reads the data, applies --train-rows and cuts the training rows into their fixed
// shards.
func (f *dataFlags) load(ctx context.Context, rf runFlags) (trainData, *shard.Table, error) {
	if f.trainRows < 0 {
		return trainData{}, nil, fmt.Errorf("--train-rows %d: give a positive number of rows, or 0 for all", f.trainRows)
	}
	if rf.shards < 0 {
		return trainData{}, nil, fmt.Errorf("--shards %d: must be positive", rf.shards)
	}
	td, te, err := f.read(ctx, rf.shards)
	if err != nil {
		return trainData{}, nil, err
	}
	if f.trainRows > 0 && f.trainRows < td.all.N() {
		td, err = rf.cut(shard.SampleRows(td.all, f.trainRows))
	}
	return td, te, err
}

// read reads the training and test rows. Training rows from a CSV file are cut into k
// shards exactly as a cluster cuts that file (line-aligned byte ranges of a plain CSV, row
// ranges of a gzipped one; with --data, of the file's head), so that eval and a cluster
// job train the same model bits; a UCI split is cut into row ranges, as a cluster cuts it.
func (f *dataFlags) read(ctx context.Context, k int) (td trainData, te *shard.Table, err error) {
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
		return td, nil, fmt.Errorf("give exactly one data source: --uci DIR --split K, --train F --test F, or --data F --test-tail FRAC")
	}
	switch {
	case f.uci != "":
		tr, te, err := shard.LoadUCI(f.uci, f.split)
		if err != nil {
			return td, nil, err
		}
		td, err = runFlags{shards: k}.cut(tr)
		return td, te, err
	case f.data != "":
		if !(f.testTail > 0 && f.testTail < 1) {
			return td, nil, fmt.Errorf("--test-tail %g: must be between 0 and 1", f.testTail)
		}
		all, err := shard.LoadCSV(f.data, opts)
		if err != nil {
			return td, nil, err
		}
		cut := all.N() - int(math.Round(f.testTail*float64(all.N())))
		if cut < 2 || cut >= all.N() {
			return td, nil, fmt.Errorf("--test-tail %g leaves %d training and %d test rows of %d; both need rows", f.testTail, cut, all.N()-cut, all.N())
		}
		te = all.Slice(cut, all.N())
		if strings.HasSuffix(f.data, ".gz") {
			td, err = runFlags{shards: k}.cut(all.Slice(0, cut))
			return td, te, err
		}
		refs, err := shard.SplitHead(f.data, opts, cut, k)
		if err != nil {
			return td, nil, err
		}
		td, err = readRanges(f.data, refs, opts)
		return td, te, err
	default:
		if f.trainCSV == "" || f.testCSV == "" {
			return td, nil, fmt.Errorf("--train and --test go together")
		}
		src := shard.Source{URI: f.trainCSV, Format: "csv", Header: f.header, Target: f.target, Columns: opts.Columns}
		l, tabs, err := shard.Reader{}.LoadAll(ctx, src, k)
		if err != nil {
			return td, nil, err
		}
		if te, err = shard.LoadCSV(f.testCSV, opts); err != nil {
			return td, nil, err
		}
		td = trainData{all: concatTables(tabs), refs: l.Refs, tabs: tabs}
		if te.D != td.all.D {
			return td, nil, fmt.Errorf("%s has %d input columns but %s has %d", f.testCSV, te.D, f.trainCSV, td.all.D)
		}
		return td, te, nil
	}
}

// trainData is the training rows and their fixed shards.
type trainData struct {
	all  *shard.Table // every training row, in shard order
	refs []shard.Ref
	tabs []*shard.Table
}

// readRanges reads the byte ranges refs of the plain CSV file at path.
func readRanges(path string, refs []shard.Ref, opts shard.CSVOptions) (trainData, error) {
	tabs := make([]*shard.Table, len(refs))
	for i, ref := range refs {
		t, err := shard.ReadRange(path, ref, opts)
		if err != nil {
			return trainData{}, err
		}
		tabs[i] = t
	}
	return trainData{all: concatTables(tabs), refs: refs, tabs: tabs}, nil
}

// concatTables returns the rows of tabs, which share their columns, as one table.
func concatTables(tabs []*shard.Table) *shard.Table {
	if len(tabs) == 1 {
		return tabs[0]
	}
	t := &shard.Table{Source: tabs[0].Source, Columns: tabs[0].Columns, Target: tabs[0].Target, D: tabs[0].D}
	for _, s := range tabs {
		t.X = append(t.X, s.X...)
		t.Y = append(t.Y, s.Y...)
	}
	return t
}

// specFlags are the job-setting flags of eval and submit: the settings every method shares,
// written here, and one flag per method setting, derived from the settings messages
// (settingflags.go).
type specFlags struct {
	method, kernel string
	seed           uint64
	ls, sf2, sn2   string
	maxIter        int
	settings       []*settingFlag
}

func (f *specFlags) register(cmd *cobra.Command, defMethod string) {
	fl := cmd.Flags()
	fl.StringVar(&f.method, "method", defMethod, "training method: "+methodHelp())
	fl.StringVar(&f.kernel, "kernel", "", "kernel: rbf, matern12, matern32, matern52, or auto (exact, cg and kmcg: the family with the highest marginal likelihood of rbf, matern52 and matern32 on the search's sampled rows, which they check on all rows when the sample was smaller) (default: auto for exact, cg, kmcg and --method auto, rbf for the other methods)")
	fl.Uint64Var(&f.seed, "seed", 0, seedHelp())
	fl.StringVar(&f.ls, "lengthscale-bounds", "", "LO,HI bounds on lengthscales, standardized units (default 0.05,100)")
	fl.StringVar(&f.sf2, "signal-variance-bounds", "", "LO,HI bounds on the signal variance, standardized units (default 0.05,20)")
	fl.StringVar(&f.sn2, "noise-variance-bounds", "", "LO,HI bounds on the noise variance, standardized units (default 1e-4,2)")
	fl.IntVar(&f.maxIter, "max-iter", 0, fmt.Sprintf("optimizer iterations at most, L-BFGS stopping earlier when converged (default %d; vof with the hermite basis and the full batch: %d)", train.DefaultMaxIter, train.VOFLBFGSMaxIter))
	f.settings = registerSettingFlags(cmd)
}

// methodHelp lists auto and the registered methods with their summaries.
func methodHelp() string {
	parts := []string{train.Auto + " (" + train.AutoSummary() + ")"}
	for _, m := range train.Methods() {
		parts = append(parts, m.Name)
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// seedHelp lists what the seed draws: the hyperparameter search's, and for each registered
// method that draws, what it draws (Method.Draws).
func seedHelp() string {
	parts := []string{"the start search's row sample and starts"}
	for _, m := range train.Methods() {
		if m.Draws != "" {
			parts = append(parts, m.Name+" "+m.Draws)
		}
	}
	return "seed of every random draw (" + strings.Join(parts, "; ") + ")"
}

// jobSpec is the JobSpec the flags describe: the common fields and the method's settings
// message in the settings oneof. Errors name the flag.
func (f *specFlags) jobSpec() (*pb.JobSpec, error) {
	js := &pb.JobSpec{Method: f.method, Kernel: f.kernel, Seed: f.seed, MaxIter: int32(f.maxIter)}
	if f.maxIter > math.MaxInt32 || f.maxIter < math.MinInt32 {
		return nil, fmt.Errorf("--max-iter %d: too large", f.maxIter)
	}
	for _, b := range []struct {
		flag string
		val  string
		dst  *[]float64
	}{{"--lengthscale-bounds", f.ls, &js.LengthscaleBounds}, {"--signal-variance-bounds", f.sf2, &js.SignalVarianceBounds}, {"--noise-variance-bounds", f.sn2, &js.NoiseVarianceBounds}} {
		if b.val == "" {
			continue
		}
		v, err := parseFloats(b.flag, b.val)
		if err != nil {
			return nil, err
		}
		if len(v) != 2 {
			return nil, fmt.Errorf("%s %q: give two numbers LO,HI", b.flag, b.val)
		}
		*b.dst = v
	}
	if msg, ok := train.NewSettings(strings.TrimSpace(f.method)); ok {
		if err := applySettingFlags(f.settings, strings.TrimSpace(f.method), msg); err != nil {
			return nil, flagError(err)
		}
		setSettings(js, strings.TrimSpace(f.method), msg)
	}
	return js, nil
}

// spec is the train.Spec of the flags (train.SpecFromJobSpec of jobSpec), checked as far as
// it can be without the data. Errors name the flag.
func (f *specFlags) spec() (train.Spec, error) {
	js, err := f.jobSpec()
	if err != nil {
		return train.Spec{}, err
	}
	s, err := train.SpecFromJobSpec(js)
	if err != nil {
		return train.Spec{}, flagError(err)
	}
	return s, nil
}

// flagError names the setting of a train error ("cg-iters: ...") as its flag.
func flagError(err error) error {
	return renameSetting(err, flagNames)
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
	cmd.Flags().IntVar(&f.shards, "shards", 0, fmt.Sprintf("number of shards (fixed per job; default: from the row count alone, %d for 4,096 to 1,048,576 rows, one per %d rows above, one per %d rows below)", shard.DefaultParallelShards, shard.DefaultRowsPerShard, shard.DefaultMinRowsPerShard))
	cmd.Flags().IntVar(&f.workers, "cores", runtime.NumCPU(), "shard tasks run at once (never changes the result)")
	// --workers was the name before worker serve's --cores became the one name.
	cmd.Flags().IntVar(&f.workers, "workers", runtime.NumCPU(), "shard tasks run at once")
	deprecatedAlias(cmd, "workers", "cores")
}

// cut cuts rows held in memory (a UCI split, a sample, a gzipped CSV) into the job's
// fixed row-range shards, as a cluster cuts a source read whole.
func (f runFlags) cut(tr *shard.Table) (trainData, error) {
	if f.shards < 0 {
		return trainData{}, fmt.Errorf("--shards %d: must be positive", f.shards)
	}
	k := f.shards
	if k == 0 {
		k = shard.DefaultShards(tr.N())
	}
	refs, tabs := shard.PartitionCount(tr, k)
	return trainData{all: tr, refs: refs, tabs: tabs}, nil
}

// evalResult is what eval prints; with --json exactly these fields.
type evalResult struct {
	Method   string `json:"method"`
	Kernel   string `json:"kernel"`
	NTrain   int    `json:"n_train"`
	NTest    int    `json:"n_test"`
	D        int    `json:"d"`
	Shards   int    `json:"shards"`
	Workers  int    `json:"workers"`
	Features int    `json:"features,omitempty"`
	// Layout is how a feature method combines the inputs' 1-D bases (vof: tensor or
	// additive), from the model's description; empty for the methods without a choice.
	Layout string  `json:"layout,omitempty"`
	RMSE   float64 `json:"rmse"`
	NLL    float64 `json:"nll"`
	// The same two scores for the target standardized by the training rows' mean and
	// standard deviation, the units most GP papers report (RMSE / s, NLL - log s).
	RMSEStd        float64 `json:"rmse_standardized"`
	NLLStd         float64 `json:"nll_standardized"`
	Coverage95     float64 `json:"coverage95"`
	TrainSeconds   float64 `json:"train_seconds"`
	PredictSeconds float64 `json:"predict_seconds"`
	Iterations     int     `json:"iterations"`
	LogLikelihood  float64 `json:"log_likelihood"`
	// LogLikelihoodSE is the standard error of an estimated log likelihood (cg), absent
	// when the value is exact.
	LogLikelihoodSE float64     `json:"log_likelihood_se,omitempty"`
	Hyperparameters hyperResult `json:"hyperparameters"`
	ModelPath       string      `json:"model_path,omitempty"`
	// MethodRequested is "auto" when the method was chosen automatically, MethodReason why.
	MethodRequested string `json:"method_requested,omitempty"`
	MethodReason    string `json:"method_reason,omitempty"`
	// KernelReason says why exact, cg or kmcg chose Kernel by the evidence (--kernel auto).
	KernelReason string `json:"kernel_reason,omitempty"`
	// Domain is the box of inputs where the model's approximation is accurate (gl), and
	// OutsideDomain the number of test rows beyond it, which were scored with the prior.
	Domain        string `json:"domain,omitempty"`
	OutsideDomain int    `json:"outside_domain"`
	// Extrapolated counts the test rows beyond the training inputs' box by more than
	// model.ExtrapolationLengthscales lengthscales (model.Prediction.Extrapolated).
	Extrapolated int `json:"extrapolated"`
	// Warnings are the model's warnings and those of this evaluation (outside_domain).
	Warnings []warningResult `json:"warnings"`
}

// warningResult is a model.Warning in the JSON output.
type warningResult struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// warningsOf lists a model's warnings for the output (never nil, so JSON shows []).
func warningsOf(ws []model.Warning) []warningResult {
	out := []warningResult{}
	for _, w := range ws {
		out = append(out, warningResult{Code: w.Code, Message: w.Message})
	}
	return out
}

type hyperResult struct {
	Lengthscales   []float64 `json:"lengthscales"`
	SignalVariance float64   `json:"signal_variance"`
	NoiseVariance  float64   `json:"noise_variance"`
}

// evaluate trains spec on td's shards with the local engine and scores the model on te. The
// test inputs' box goes into the spec, so that gl sizes its grid for them too.
func evaluate(ctx context.Context, spec train.Spec, td trainData, te *shard.Table, rf runFlags, obs train.Observer) (*evalResult, *model.Model, error) {
	eng, err := engine.NewLocal(td.refs, td.tabs, rf.workers)
	if err != nil {
		return nil, nil, err
	}
	tr := td.all
	spec.Columns, spec.Target = tr.Columns, tr.Target
	if te.N() > 0 && len(spec.PredictMin) == 0 {
		spec.PredictMin, spec.PredictMax = columnRange(te)
	}
	t0 := time.Now()
	m, err := train.Train(ctx, eng, spec, obs)
	if err != nil {
		return nil, nil, err
	}
	trainSec := time.Since(t0).Seconds()
	if obs != nil {
		obs(train.Event{Phase: "predict", Message: fmt.Sprintf("%d test rows", te.N())})
	}
	r, err := score(m, tr, te, len(eng.Shards()), rf.workers, trainSec)
	return r, m, err
}

// columnRange returns the per-column minima and maxima of t's inputs.
func columnRange(t *shard.Table) (lo, hi []float64) {
	lo, hi = slices.Clone(t.Row(0)), slices.Clone(t.Row(0))
	for i := 1; i < t.N(); i++ {
		for k, v := range t.Row(i) {
			lo[k], hi[k] = math.Min(lo[k], v), math.Max(hi[k], v)
		}
	}
	return lo, hi
}

// score evaluates a trained model on te as eval reports it: metrics in original and
// standardized units, the method choice, the domain and every warning.
func score(m *model.Model, tr, te *shard.Table, shards, workers int, trainSec float64) (*evalResult, error) {
	t1 := time.Now()
	pred, err := m.Predict(te.X, te.N())
	if err != nil {
		return nil, err
	}
	predSec := time.Since(t1).Seconds()
	sc, err := model.Score(pred, te.Y)
	if err != nil {
		return nil, err
	}
	h := m.Original()
	r := &evalResult{
		Method: m.Method, Kernel: m.Kernel, NTrain: tr.N(), NTest: te.N(), D: tr.D, Shards: shards, Workers: workers,
		RMSE: sc.RMSE, NLL: sc.NLL, Coverage95: sc.Coverage95, TrainSeconds: trainSec, PredictSeconds: predSec,
		Iterations: m.Iterations, LogLikelihood: m.LogLik, LogLikelihoodSE: m.LogLikSE,
		Hyperparameters: hyperResult{Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance, NoiseVariance: h.NoiseVariance},
		Domain:          m.DomainString(), OutsideDomain: pred.NOutside, Extrapolated: pred.NExtrapolated, Warnings: warningsOf(m.Warnings),
	}
	r.RMSEStd, r.NLLStd = sc.RMSE/m.Transform.YScale, sc.NLL-math.Log(m.Transform.YScale)
	r.Features = m.NumFeatures()
	if m.Posterior != nil {
		for _, f := range m.Posterior.Describe() {
			if l, ok := f.Value.(string); ok && f.Name == "layout" {
				r.Layout = l
			}
		}
	}
	if c := m.Choice; c != nil {
		r.MethodRequested, r.MethodReason = c.Requested, c.Reason
	}
	r.KernelReason = m.KernelReason
	if pred.NOutside > 0 {
		r.Warnings = append(r.Warnings, warningResult{Code: model.WarnOutsideDomain, Message: outsideMessage(m, pred.NOutside, te.N())})
	}
	if pred.NExtrapolated > 0 {
		r.Warnings = append(r.Warnings, warningResult{Code: model.WarnExtrapolation, Message: extrapolationMessage(m, pred, te.N())})
	}
	return r, nil
}

// extrapolationMessage says how many of n rows lie beyond the training inputs' box, how far
// at most, and what that means for their predictions.
func extrapolationMessage(m *model.Model, p model.Prediction, n int) string {
	k := p.BeyondInput
	return fmt.Sprintf("%d of %d rows lie beyond the training inputs' range by more than %g lengthscale (at most %.3g lengthscales, farthest in %s, whose lengthscale is %.4g): the model extrapolates there, its prediction returns towards the prior (mean %.6g; for an additive kernel, the component of the input out of range) and does not follow a trend or any signal its kernel does not represent, so the intervals may not cover such a signal; predict flags these rows in its extrapolated column",
		p.NExtrapolated, n, model.ExtrapolationLengthscales, p.Beyond, m.ColumnName(k), m.Original().Lengthscales[k], m.Transform.YMean)
}

// outsideMessage says how many of n rows lie outside the model's domain and what they got.
func outsideMessage(m *model.Model, k, n int) string {
	return fmt.Sprintf("%d of %d rows lie outside the model's domain (%s), where its approximation does not hold (gl: the features alias); they are predicted by the prior (mean %.6g, variance %.6g) and flagged",
		k, n, m.DomainString(), m.Transform.YMean, m.Original().SignalVariance)
}

func newEvalCmd(e *env) *cobra.Command {
	var df dataFlags
	var sf specFlags
	var rf runFlags
	var of outputFlags
	var modelOut, kernelCache string
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Train a method on training data and report RMSE, NLL, 95% coverage and times on test data",
		Example: `  coordinator eval --method gl --uci testdata/uci/yacht --split 0 --lengthscale-bounds 0.2,2
  coordinator eval --method exact --uci testdata/uci/servo --split 3 -o json
  coordinator eval --uci testdata/uci/concrete --split 0     # --method auto: prints its choice
  coordinator eval --method gl --data internal/cli/testdata/maunaloa_co2.csv --header --test-tail 0.1
  coordinator eval --method cg --uci testdata/uci/concrete --split 0 --truncation rr --train-rows 500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			spec, err := sf.spec()
			if err != nil {
				return err
			}
			// The settings are checked before reading the data (spec); the checks that need
			// the number of input columns run in training.
			td, te, err := df.load(cmd.Context(), rf)
			if err != nil {
				return err
			}
			var obs train.Observer
			var pr *progress
			if !o.structured() {
				pr = newProgress(e.errOut, e.tty)
				obs = pr.observe
			}
			ctx, err := withKernelCache(cmd.Context(), kernelCache)
			if err != nil {
				return err
			}
			r, m, err := evaluate(ctx, spec, td, te, rf, obs)
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
			return o.print(e.out, r, func(w io.Writer) error { printResult(w, r); return nil })
		},
	}
	df.register(cmd)
	sf.register(cmd, train.Auto)
	registerSpecCompletions(cmd)
	rf.register(cmd)
	of.register(cmd)
	cmd.Flags().StringVar(&modelOut, "model-out", "", "also write the trained model to this file")
	cmd.Flags().StringVar(&kernelCache, "kernel-cache-size", "", fmt.Sprintf(
		"cg: memory for the kernel blocks of one hyperparameter value (bytes, or with a KiB, MiB, GiB or TiB suffix; none: form them for every product; default: 1/%d of the machine's memory, now %s); never changes the result",
		tasks.KernelCacheMemoryShare, fmtSize(tasks.DefaultKernelCacheBytes())))
	return cmd
}

// withKernelCache returns ctx carrying the --kernel-cache-size budget (tasks.WithKernelCacheBytes),
// or ctx itself for the default.
func withKernelCache(ctx context.Context, size string) (context.Context, error) {
	b, err := parseKernelCache(size)
	if err != nil || b == 0 {
		return ctx, err
	}
	return tasks.WithKernelCacheBytes(ctx, b), nil
}

// parseKernelCache reads a --kernel-cache-size value: 0 for the default (""), -1 for none
// ("none" or "0"), else the size in bytes.
func parseKernelCache(size string) (int64, error) {
	switch strings.TrimSpace(size) {
	case "":
		return 0, nil
	case "none", "0":
		return -1, nil
	}
	b, err := parseSize(size)
	if err != nil {
		return 0, fmt.Errorf("--kernel-cache-size: %w; or none", err)
	}
	return b, nil
}

// fmtSize writes a byte count in GiB or MiB.
func fmtSize(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.1fGiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%dMiB", b>>20)
}

func printResult(w io.Writer, r *evalResult) {
	fmt.Fprintf(w, "method      %s (kernel %s", r.Method, r.Kernel)
	if r.Features > 0 {
		fmt.Fprintf(w, ", %d features", r.Features)
	}
	if r.Layout != "" {
		fmt.Fprintf(w, ", %s layout", r.Layout)
	}
	fmt.Fprintf(w, ")\n")
	if r.MethodRequested != "" {
		fmt.Fprintf(w, "chosen by   %s: %s\n", r.MethodRequested, r.MethodReason)
	}
	if r.KernelReason != "" {
		fmt.Fprintf(w, "kernel by   evidence: %s\n", r.KernelReason)
	}
	fmt.Fprintf(w, "data        %d train, %d test rows, d = %d, %d shards\n", r.NTrain, r.NTest, r.D, r.Shards)
	fmt.Fprintf(w, "test RMSE   %.6g\n", r.RMSE)
	fmt.Fprintf(w, "test NLL    %.6g\n", r.NLL)
	fmt.Fprintf(w, "standardized target: RMSE %.6g, NLL %.6g\n", r.RMSEStd, r.NLLStd)
	fmt.Fprintf(w, "coverage95  %.3f\n", r.Coverage95)
	fmt.Fprintf(w, "lengthscale %s\n", fmtList(r.Hyperparameters.Lengthscales))
	fmt.Fprintf(w, "signal var  %.6g\n", r.Hyperparameters.SignalVariance)
	fmt.Fprintf(w, "noise var   %.6g\n", r.Hyperparameters.NoiseVariance)
	fmt.Fprintf(w, "train       %.2f s (%d iterations)   predict %.3f s\n", r.TrainSeconds, r.Iterations, r.PredictSeconds)
	if r.LogLikelihoodSE > 0 {
		fmt.Fprintf(w, "log p(y)    %.6g ± %.2g (estimate ± standard error; standardized target)\n", r.LogLikelihood, r.LogLikelihoodSE)
	}
	if r.Domain != "" {
		fmt.Fprintf(w, "domain      %s (%d test rows outside)\n", r.Domain, r.OutsideDomain)
	}
	if r.ModelPath != "" {
		fmt.Fprintf(w, "model       %s\n", r.ModelPath)
	}
	printWarnings(w, r.Warnings)
}

// printWarnings prints one "warning" line per warning.
func printWarnings(w io.Writer, ws []warningResult) {
	for _, x := range ws {
		fmt.Fprintf(w, "warning     %s: %s\n", x.Code, x.Message)
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
