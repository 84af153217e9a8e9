package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// stateName is a job state in lower case without its prefix: pending, running, succeeded,
// failed, canceled.
func stateName(s pb.JobState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "JOB_STATE_"))
}

// jobResult is a job as status --json, jobs --json and submit --json print it.
type jobResult struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Error  string `json:"error,omitempty"`
	Method string `json:"method"`
	Kernel string `json:"kernel"`
	Data   string `json:"data"`
	// TrainRows is the size of the fixed sample of the data the job trains on (0: all rows).
	TrainRows       int64        `json:"train_rows,omitempty"`
	Shards          int32        `json:"shards,omitempty"`
	Iteration       int32        `json:"iteration"`
	MaxIter         int32        `json:"max_iter"`
	Objective       float64      `json:"objective"`
	Created         time.Time    `json:"created"`
	Updated         time.Time    `json:"updated"`
	Hyperparameters *hyperResult `json:"hyperparameters,omitempty"`
	Metrics         *jobMetrics  `json:"metrics,omitempty"`
	// ChosenMethod and MethodReason: what method auto chose and why (once succeeded).
	ChosenMethod string `json:"chosen_method,omitempty"`
	MethodReason string `json:"method_reason,omitempty"`
	// ChosenKernel and KernelReason: the kernel exact, cg or kmcg chose by the evidence
	// (kernel auto) and why (once succeeded).
	ChosenKernel string `json:"chosen_kernel,omitempty"`
	KernelReason string `json:"kernel_reason,omitempty"`
	// Warnings are the model's warnings (once succeeded; [] when there are none).
	Warnings []warningResult `json:"warnings,omitempty"`
}

// jobMetrics are a finished job's training figures.
type jobMetrics struct {
	NTrain        int64   `json:"n_train"`
	LogLikelihood float64 `json:"log_likelihood"`
	TrainSeconds  float64 `json:"train_seconds"`
	ModelBytes    int64   `json:"model_bytes"`
}

func newJobResult(j *pb.Job) *jobResult {
	s := j.GetSpec()
	r := &jobResult{
		ID: j.GetId(), State: stateName(j.GetState()), Error: j.GetError(),
		Method: s.GetMethod(), Kernel: s.GetKernel(), Data: s.GetData().GetUri(), TrainRows: s.GetData().GetTrainRows(), Shards: s.GetShards(),
		Iteration: j.GetIteration(), MaxIter: s.GetMaxIter(), Objective: j.GetObjective(),
		Created: time.Unix(0, j.GetCreatedUnixNano()).UTC(), Updated: time.Unix(0, j.GetUpdatedUnixNano()).UTC(),
	}
	if m := j.GetMetrics(); j.GetState() == pb.JobState_JOB_STATE_SUCCEEDED && m != nil {
		if h := m.GetHyperparameters(); h != nil {
			r.Hyperparameters = &hyperResult{Lengthscales: h.GetLengthscales(), SignalVariance: h.GetSignalVariance(), NoiseVariance: h.GetNoiseVariance()}
		}
		r.Metrics = &jobMetrics{NTrain: m.GetNTrain(), LogLikelihood: m.GetLogLikelihood(), TrainSeconds: m.GetTrainSeconds(), ModelBytes: m.GetModelBytes()}
		if c := m.GetMethodChoice(); c != nil {
			r.ChosenMethod, r.MethodReason = c.GetMethod(), c.GetReason()
		}
		if m.GetKernelReason() != "" {
			r.ChosenKernel, r.KernelReason = m.GetKernel(), m.GetKernelReason()
		}
		r.Warnings = []warningResult{}
		for _, w := range j.GetWarnings() {
			r.Warnings = append(r.Warnings, warningResult{Code: w.GetCode(), Message: w.GetMessage()})
		}
	}
	return r
}

func printJob(w io.Writer, j *pb.Job) {
	r := newJobResult(j)
	fmt.Fprintf(w, "job         %s\n", r.ID)
	fmt.Fprintf(w, "state       %s\n", r.State)
	if r.Error != "" {
		fmt.Fprintf(w, "error       %s\n", r.Error)
	}
	fmt.Fprintf(w, "method      %s (kernel %s)\n", r.Method, r.Kernel)
	if r.ChosenMethod != "" {
		fmt.Fprintf(w, "chosen      %s: %s\n", r.ChosenMethod, r.MethodReason)
	}
	if r.ChosenKernel != "" {
		fmt.Fprintf(w, "kernel by   evidence: %s\n", r.KernelReason)
	}
	data := r.Data
	if d := j.GetSpec().GetData(); d.GetFormat() == "uci" {
		data += fmt.Sprintf(" (UCI split %d)", d.GetSplit())
	}
	if r.TrainRows > 0 {
		data += fmt.Sprintf(", a fixed sample of %d rows", r.TrainRows)
	}
	if r.Shards > 0 {
		data += fmt.Sprintf(", %d shards", r.Shards)
	}
	fmt.Fprintf(w, "data        %s\n", data)
	if r.Iteration > 0 || r.Objective != 0 {
		fmt.Fprintf(w, "iteration   %d/%d   -log p(y)/n = %.6f\n", r.Iteration, r.MaxIter, r.Objective)
	}
	if h := r.Hyperparameters; h != nil {
		fmt.Fprintf(w, "lengthscale %s\n", fmtList(h.Lengthscales))
		fmt.Fprintf(w, "signal var  %.6g\n", h.SignalVariance)
		fmt.Fprintf(w, "noise var   %.6g\n", h.NoiseVariance)
	}
	if m := r.Metrics; m != nil {
		fmt.Fprintf(w, "train       %.2f s, %d rows, log p(y) = %.6g\n", m.TrainSeconds, m.NTrain, m.LogLikelihood)
		fmt.Fprintf(w, "model       %d bytes (coordinator predict --job %s --data X.csv --out preds.csv)\n", m.ModelBytes, r.ID)
	}
	printWarnings(w, r.Warnings)
	fmt.Fprintf(w, "created     %s   updated %s\n", r.Created.Local().Format(time.DateTime), r.Updated.Local().Format(time.DateTime))
}

// jobOutcome is the error a command returns for a job that did not succeed.
func jobOutcome(j *pb.Job) error {
	switch j.GetState() {
	case pb.JobState_JOB_STATE_FAILED:
		return fmt.Errorf("job %s failed: %s", j.GetId(), j.GetError())
	case pb.JobState_JOB_STATE_CANCELED:
		if j.GetError() != "" {
			return fmt.Errorf("job %s was canceled: %s", j.GetId(), j.GetError())
		}
		return fmt.Errorf("job %s was canceled", j.GetId())
	}
	return nil
}

func getJob(ctx context.Context, c *client, id string) (*pb.Job, error) {
	j, err := call(ctx, c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.Job, error) {
		return cl.GetJob(ctx, &pb.GetJobRequest{Id: id}, opts...)
	})
	return j, err
}

// jobFlagNames are the flags that describe a job, which a job file replaces: the common
// settings, the method settings' derived flags and the data flags.
func jobFlagNames() []string {
	names := []string{"method", "kernel", "seed", "lengthscale-bounds", "signal-variance-bounds", "noise-variance-bounds", "max-iter"}
	names = append(names, settingFlagNames()...)
	return append(names, "data", "format", "split", "header", "target", "columns", "shards", "shard-timeout")
}

func newSubmitCmd(e *env) *cobra.Command {
	var cf clientFlags
	var sf specFlags
	var f submitFlags
	var wait bool
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "submit (JOB.yaml | --data URI [flags])",
		Short: "Submit a training job to a running cluster; --wait follows it to the end",
		Long: `submit sends a training job to the coordinators and prints its ID.

The job is a YAML file with the fields of a job spec (snake_case keys; unknown keys are
errors), or flags: the method's flags are those of eval, the data is --data with --format.

  method: auto          # the default: exact, gl or grief by n, d and the budget
  kernel: rbf
  lengthscale_bounds: [0.2, 2]
  nodes_per_dim: [40, 40]
  data:
    uri: train.csv        # relative to the job file; file:// and http(s):// URLs work too
    format: csv           # or uci: a UCI dataset directory, with split: K
    header: true
    target: y
    columns: [a, b]
  shards: 8

The data flags are eval's: --uci DIR --split K for a UCI split, --data with --header,
--target and --columns for a CSV file or URL, and --train-rows N to train on a fixed sample
of N rows (the same rows as eval --train-rows, so with the same --shards the model is eval's,
bit for bit). Paths are read by the workers: a relative path is made absolute here, so it
only works when the workers share this machine's files.

With --wait, submit streams the job's progress (a bar on a terminal, JSON lines otherwise)
to stderr, prints the final status, and exits non-zero if the job failed or was canceled.`,
		Example: `  coordinator submit job.yaml --addr 10.0.0.5:7100 --wait
  coordinator submit --method exact --uci testdata/uci/yacht --split 0 --shards 4 --wait
  coordinator submit --data train.csv --header --train-rows 500 --shard-timeout 2m
  GPREDUCE_TOKEN=$(cat token) coordinator submit --data s3.csv --header --target y --lengthscale-bounds 0.2,2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			var j *job
			if len(args) == 1 {
				var set []string
				for _, n := range jobFlagNames() {
					if cmd.Flags().Changed(n) {
						set = append(set, "--"+n)
					}
				}
				set = append(set, f.withJobFile(cmd)...)
				if len(set) > 0 {
					return usageErrorf("%s cannot be combined with a job file: put the settings in %s", strings.Join(set, ", "), args[0])
				}
				if j, err = readJobFile(args[0]); err != nil {
					return err
				}
			} else {
				if !f.given() {
					return usageErrorf("give a job file (coordinator submit JOB.yaml) or the data (--data URI or --uci DIR)")
				}
				s, err := sf.spec()
				if err != nil {
					return err
				}
				src, timeoutSec, err := f.source()
				if err != nil {
					return err
				}
				spec, err := buildJobSpec(s, src, f.shards, timeoutSec, ".", flagNames)
				if err != nil {
					return err
				}
				j = &job{spec: spec}
			}
			if f.id != "" {
				j.id = f.id
			}
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			sub, err := call(ctx, c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.Job, error) {
				return cl.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: j.spec, Id: j.id}, opts...)
			})
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			e.log.Info().Str("job", sub.GetId()).Msg("submitted")
			if !wait {
				return o.print(e.out, newJobResult(sub), func(w io.Writer) error {
					_, err := fmt.Fprintln(w, sub.GetId())
					return err
				})
			}
			if !o.structured() {
				fmt.Fprintln(e.out, sub.GetId())
			}
			final, err := followJob(ctx, e, c, sub.GetId())
			if err != nil {
				return err
			}
			if err := o.print(e.out, newJobResult(final), func(w io.Writer) error { printJob(w, final); return nil }); err != nil {
				return err
			}
			return jobOutcome(final)
		},
	}
	sf.register(cmd, train.Auto)
	registerSpecCompletions(cmd)
	f.register(cmd, e.errOut)
	fl := cmd.Flags()
	fl.BoolVar(&wait, "wait", false, "follow the job until it finishes and print its final status")
	of.register(cmd)
	cmd.Flag("output").Usage = "print the job (with --wait: its final status) as a table, json or yaml"
	cf.register(cmd)
	return cmd
}

func newStatusCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:               "status ID",
		Short:             "Show a job's state, progress and, once it succeeded, its hyperparameters and metrics",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(&cf, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			j, err := getJob(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			return o.print(e.out, newJobResult(j), func(w io.Writer) error { printJob(w, j); return nil })
		},
	}
	of.register(cmd)
	cf.register(cmd)
	return cmd
}

func newJobsCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List the cluster's jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := listJobs(cmd.Context(), c)
			if err != nil {
				return err
			}
			out := make([]*jobResult, 0, len(resp.GetJobs()))
			for _, j := range resp.GetJobs() {
				out = append(out, newJobResult(j))
			}
			return o.print(e.out, out, func(w io.Writer) error { return printJobTable(w, resp.GetJobs()) })
		},
	}
	of.register(cmd)
	cf.register(cmd)
	return cmd
}

// listJobs asks the leader for every job.
func listJobs(ctx context.Context, c *client) (*pb.ListJobsResponse, error) {
	return call(ctx, c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.ListJobsResponse, error) {
		return cl.ListJobs(ctx, &pb.ListJobsRequest{}, opts...)
	})
}

// printJobTable prints jobs as the table of `coordinator jobs`.
func printJobTable(w io.Writer, jobs []*pb.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tMETHOD\tITER\tOBJECTIVE\tAGE\tDATA")
	for _, j := range jobs {
		r := newJobResult(j)
		obj := "-"
		if r.Iteration > 0 {
			obj = fmt.Sprintf("%.6f", r.Objective)
		}
		method := r.Method
		if r.ChosenMethod != "" {
			method += "->" + r.ChosenMethod
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.ID, r.State, method, r.Iteration, r.MaxIter, obj, age(r.Created), r.Data)
	}
	return tw.Flush()
}

// age is how long ago t was, rounded for a table.
func age(t time.Time) string {
	if t.Unix() <= 0 {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// jobState is what cancel and delete print per job.
type jobState struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

func newCancelCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:               "cancel ID",
		Short:             "Cancel a pending or running job",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(&cf, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			j, err := call(cmd.Context(), c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.Job, error) {
				return cl.CancelJob(ctx, &pb.CancelJobRequest{Id: args[0]}, opts...)
			})
			if err != nil {
				return err
			}
			r := jobState{ID: j.GetId(), State: stateName(j.GetState())}
			return o.print(e.out, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "job %s: %s\n", r.ID, r.State)
				return err
			})
		},
	}
	of.register(cmd)
	cf.register(cmd)
	return cmd
}

func newDeleteCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete finished jobs with their models, checkpoints and events from every coordinator",
		Long: `delete removes finished (succeeded, failed or canceled) jobs from the cluster: their
records, models, checkpoints and events, on every coordinator. A pending or running job is
refused: cancel it first. Nothing is deleted if any ID is unknown or unfinished.

serve --retain-jobs and --retain-for delete finished jobs automatically.`,
		Example: `  coordinator delete job-3f2a9c1b7d4e
  coordinator cancel j-42 && coordinator delete j-42`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeJobIDs(&cf, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := call(cmd.Context(), c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.DeleteJobResponse, error) {
				return cl.DeleteJob(ctx, &pb.DeleteJobRequest{Ids: args}, opts...)
			}); err != nil {
				return err
			}
			rs := []jobState{}
			for _, id := range args {
				rs = append(rs, jobState{ID: id, State: "deleted"})
			}
			return o.print(e.out, rs, func(w io.Writer) error {
				for _, r := range rs {
					if _, err := fmt.Fprintf(w, "job %s: %s\n", r.ID, r.State); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	of.register(cmd)
	cf.register(cmd)
	return cmd
}
