package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
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
	ID              string       `json:"id"`
	State           string       `json:"state"`
	Error           string       `json:"error,omitempty"`
	Method          string       `json:"method"`
	Kernel          string       `json:"kernel"`
	Data            string       `json:"data"`
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
		Method: s.GetMethod(), Kernel: s.GetKernel(), Data: s.GetData().GetUri(), Shards: s.GetShards(),
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
	data := r.Data
	if d := j.GetSpec().GetData(); d.GetFormat() == "uci" {
		data += fmt.Sprintf(" (UCI split %d)", d.GetSplit())
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

// submitFlags are submit's data and job flags (the method's flags are specFlags).
type submitFlags struct {
	data, format, target, columns string
	split, shards, timeout        int
	header                        bool
	id                            string
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
	var wait, asJSON bool
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

Paths are read by the workers: a relative path is made absolute here, so it only works
when the workers share this machine's files.

With --wait, submit streams the job's progress (a bar on a terminal, JSON lines otherwise)
to stderr, prints the final status, and exits non-zero if the job failed or was canceled.`,
		Example: `  coordinator submit job.yaml --addr 10.0.0.5:7100 --wait
  coordinator submit --method gl --data ../shared/data/uci/yacht --format uci --split 0 --shards 4 --wait
  GPREDUCE_TOKEN=$(cat token) coordinator submit --data s3.csv --header --target y --lengthscale-bounds 0.2,2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j *job
			var err error
			if len(args) == 1 {
				var set []string
				for _, n := range jobFlagNames() {
					if cmd.Flags().Changed(n) {
						set = append(set, "--"+n)
					}
				}
				if len(set) > 0 {
					return fmt.Errorf("%s cannot be combined with a job file: put the settings in %s", strings.Join(set, ", "), args[0])
				}
				if j, err = readJobFile(args[0]); err != nil {
					return err
				}
			} else {
				if f.data == "" {
					return fmt.Errorf("give a job file (coordinator submit JOB.yaml) or the data (--data URI)")
				}
				s, err := sf.spec()
				if err != nil {
					return err
				}
				src := shard.Source{URI: f.data, Format: f.format, Split: f.split, Header: f.header, Target: f.target}
				if f.columns != "" {
					src.Columns = strings.Split(f.columns, ",")
				}
				spec, err := buildJobSpec(s, src, f.shards, f.timeout, ".", flagNames)
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
				if asJSON {
					return json.NewEncoder(e.out).Encode(newJobResult(sub))
				}
				fmt.Fprintln(e.out, sub.GetId())
				return nil
			}
			if !asJSON {
				fmt.Fprintln(e.out, sub.GetId())
			}
			final, err := followJob(ctx, e, c, sub.GetId())
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(e.out).Encode(newJobResult(final)); err != nil {
					return err
				}
			} else {
				printJob(e.out, final)
			}
			return jobOutcome(final)
		},
	}
	sf.register(cmd, train.Auto)
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "", "data: a CSV path (made absolute), file:// or http(s):// URL, or a UCI dataset directory")
	fl.StringVar(&f.format, "format", "csv", "data format: csv or uci")
	fl.IntVar(&f.split, "split", 0, "uci: split 0-9 (its training rows)")
	fl.BoolVar(&f.header, "header", false, "csv: the file has a header line")
	fl.StringVar(&f.target, "target", "", "csv: target column, header name or 0-based index (default: the last column)")
	fl.StringVar(&f.columns, "columns", "", "csv: input columns, comma-separated names or 0-based indices (default: all but the target)")
	fl.IntVar(&f.shards, "shards", 0, "number of shards, fixed for the job (default: automatic, from the data size)")
	fl.IntVar(&f.timeout, "shard-timeout", 0, "seconds a round waits for a shard with no live worker before the job fails (default 300)")
	fl.StringVar(&f.id, "id", "", "job ID (default: the coordinator chooses one); submitting an ID twice is an error")
	fl.BoolVar(&wait, "wait", false, "follow the job until it finishes and print its final status")
	fl.BoolVar(&asJSON, "json", false, "print the job (with --wait: its final status) as one JSON object")
	cf.register(cmd)
	return cmd
}

// eventKey identifies an event, so that events a resumed watch sends again are shown once.
type eventKey struct {
	unixNano  int64
	state     pb.JobState
	phase     string
	iteration int32
	message   string
}

// eventJSON is one line of the JSON progress stream.
type eventJSON struct {
	Job       string    `json:"job"`
	Time      time.Time `json:"time"`
	State     string    `json:"state"`
	Phase     string    `json:"phase,omitempty"`
	Iteration int32     `json:"iteration,omitempty"`
	MaxIter   int32     `json:"max_iter,omitempty"`
	Objective float64   `json:"objective,omitempty"`
	Message   string    `json:"message,omitempty"`
}

func newEventJSON(ev *pb.JobEvent) eventJSON {
	return eventJSON{Job: ev.GetJobId(), Time: time.Unix(0, ev.GetUnixNano()).UTC(), State: stateName(ev.GetState()),
		Phase: ev.GetPhase(), Iteration: ev.GetIteration(), MaxIter: ev.GetMaxIter(), Objective: ev.GetObjective(), Message: ev.GetMessage()}
}

// followJob shows a job's progress on stderr (a bar on a terminal, JSON lines otherwise)
// until it is finished, and returns its final state.
func followJob(ctx context.Context, e *env, c *client, id string) (*pb.Job, error) {
	var show func(*pb.JobEvent)
	var pr *progress
	if e.tty {
		pr = newProgress(e.errOut, true)
		defer pr.done()
		show = func(ev *pb.JobEvent) { pr.observe(trainEvent(ev)) }
	} else {
		enc := json.NewEncoder(e.errOut)
		show = func(ev *pb.JobEvent) { enc.Encode(newEventJSON(ev)) }
	}
	return watchJob(ctx, c, id, show)
}

// trainEvent turns a job event into the progress type's event.
func trainEvent(ev *pb.JobEvent) train.Event {
	phase, msg := ev.GetPhase(), ev.GetMessage()
	if phase == "" || phase == "state" {
		phase = "job"
	}
	if msg == "" && phase != "optimize" {
		msg = "job " + stateName(ev.GetState())
	}
	return train.Event{Phase: phase, Iteration: int(ev.GetIteration()), MaxIter: int(ev.GetMaxIter()), Objective: ev.GetObjective(), Message: msg}
}

// watchJob streams a job's events to show until the job is finished and returns the
// finished job. A broken stream (a leader change) is resumed at the new leader; events
// sent again are shown once. Coordinators without WatchJob are polled with GetJob.
func watchJob(ctx context.Context, c *client, id string, show func(*pb.JobEvent)) (*pb.Job, error) {
	seen := map[eventKey]bool{}
	emit := func(ev *pb.JobEvent) {
		k := eventKey{ev.GetUnixNano(), ev.GetState(), ev.GetPhase(), ev.GetIteration(), ev.GetMessage()}
		if !seen[k] {
			seen[k] = true
			show(ev)
		}
	}
	poll := false
	lastContact := time.Now()
	for {
		if !poll {
			err := c.do(ctx, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) error {
				st, err := cl.WatchJob(ctx, &pb.WatchJobRequest{Id: id}, opts...)
				if err != nil {
					return err
				}
				for {
					ev, err := st.Recv()
					if err == io.EOF {
						return nil
					}
					if err != nil {
						return err
					}
					emit(ev)
				}
			})
			switch {
			case err == nil:
				lastContact = time.Now()
			case status.Code(err) == codes.Unimplemented:
				poll = true
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case !retryable(err):
				return nil, fmt.Errorf("watch job %s: %w", id, err)
			default:
				c.log.Info().Err(err).Str("job", id).Msg("lost the job's event stream; resuming")
			}
		}
		j, err := getJob(ctx, c, id)
		if err != nil {
			if ctx.Err() != nil || !retryable(err) || time.Since(lastContact) > c.leaderWait {
				return nil, fmt.Errorf("job %s: %w", id, err)
			}
		} else {
			lastContact = time.Now()
			if poll {
				emit(&pb.JobEvent{JobId: id, State: j.GetState(), Phase: "optimize", Iteration: j.GetIteration(),
					MaxIter: j.GetSpec().GetMaxIter(), Objective: j.GetObjective(), Message: j.GetError()})
			}
			if j.GetState().Finished() {
				return j, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func newStatusCmd(e *env) *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a job's state, progress and, once it succeeded, its hyperparameters and metrics",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			j, err := getJob(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.out).Encode(newJobResult(j))
			}
			printJob(e.out, j)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cf.register(cmd)
	return cmd
}

func newJobsCmd(e *env) *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List the cluster's jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := call(cmd.Context(), c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.ListJobsResponse, error) {
				return cl.ListJobs(ctx, &pb.ListJobsRequest{}, opts...)
			})
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]*jobResult, 0, len(resp.GetJobs()))
				for _, j := range resp.GetJobs() {
					out = append(out, newJobResult(j))
				}
				return json.NewEncoder(e.out).Encode(out)
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tMETHOD\tITER\tOBJECTIVE\tAGE\tDATA")
			for _, j := range resp.GetJobs() {
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
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cf.register(cmd)
	return cmd
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

func newCancelCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a pending or running job",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			fmt.Fprintf(e.out, "job %s: %s\n", j.GetId(), stateName(j.GetState()))
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

func newDeleteCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete finished jobs with their models, checkpoints and events from every coordinator",
		Long: `delete removes finished (succeeded, failed or canceled) jobs from the cluster: their
records, models, checkpoints and events, on every coordinator. A pending or running job is
refused: cancel it first. Nothing is deleted if any ID is unknown or unfinished.

serve --retain-jobs and --retain-for delete finished jobs automatically.`,
		Example: `  coordinator delete job-3f2a9c1b7d4e
  coordinator cancel j-42 && coordinator delete j-42`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			for _, id := range args {
				fmt.Fprintf(e.out, "job %s: deleted\n", id)
			}
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

func newLogsCmd(e *env) *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's events (phases, optimizer iterations, state changes) until it finishes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			enc := json.NewEncoder(e.out)
			_, err = watchJob(cmd.Context(), c, args[0], func(ev *pb.JobEvent) {
				if asJSON {
					enc.Encode(newEventJSON(ev))
					return
				}
				fmt.Fprintln(e.out, formatEvent(ev))
			})
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per event")
	cf.register(cmd)
	return cmd
}

func formatEvent(ev *pb.JobEvent) string {
	var b strings.Builder
	b.WriteString(time.Unix(0, ev.GetUnixNano()).Local().Format("2006-01-02 15:04:05.000"))
	fmt.Fprintf(&b, "  %-9s", stateName(ev.GetState()))
	if ev.GetPhase() != "" {
		fmt.Fprintf(&b, "  %-8s", ev.GetPhase())
	}
	if ev.GetPhase() == "optimize" {
		fmt.Fprintf(&b, "  iteration %d/%d  -log p(y)/n = %.6f", ev.GetIteration(), ev.GetMaxIter(), ev.GetObjective())
	}
	if ev.GetMessage() != "" {
		b.WriteString("  " + ev.GetMessage())
	}
	return b.String()
}

func newMembersCmd(e *env) *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the coordinators (raft members) and which one leads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			ms, err := listMembers(cmd.Context(), c)
			if err != nil {
				return err
			}
			if asJSON {
				type member struct {
					ID       string `json:"id"`
					RaftAddr string `json:"raft_address"`
					APIAddr  string `json:"api_address"`
					Leader   bool   `json:"leader"`
				}
				out := []member{}
				for _, m := range ms {
					out = append(out, member{m.GetId(), m.GetRaftAddress(), m.GetApiAddress(), m.GetLeader()})
				}
				return json.NewEncoder(e.out).Encode(out)
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRAFT\tAPI\tLEADER")
			for _, m := range ms {
				l := ""
				if m.GetLeader() {
					l = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.GetId(), m.GetRaftAddress(), m.GetApiAddress(), l)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cf.register(cmd)
	cmd.AddCommand(newMembersRemoveCmd(e))
	return cmd
}

func newMembersRemoveCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a coordinator from the raft configuration (for a member that is gone for good)",
		Long: `members remove takes a coordinator out of the raft configuration, so the quorum no longer
counts it: use it for a member whose machine is gone, before replacing it. Removing the
leader makes it step down. Stop the removed member's process too; to bring it back, wipe its
--data-dir and start it with --join.`,
		Example: `  coordinator members remove c3`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := call(cmd.Context(), c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.RemoveMemberResponse, error) {
				return cl.RemoveMember(ctx, &pb.RemoveMemberRequest{Id: args[0]}, opts...)
			}); err != nil {
				return fmt.Errorf("remove member %s: %w", args[0], err)
			}
			fmt.Fprintf(e.out, "member %s: removed\n", args[0])
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

func listMembers(ctx context.Context, c *client) ([]*pb.Member, error) {
	resp, err := call(ctx, c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.ListMembersResponse, error) {
		return cl.ListMembers(ctx, &pb.ListMembersRequest{}, opts...)
	})
	return resp.GetMembers(), err
}

func newWorkersCmd(e *env) *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the live workers the leader knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := call(cmd.Context(), c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.ListWorkersResponse, error) {
				return cl.ListWorkers(ctx, &pb.ListWorkersRequest{}, opts...)
			})
			if err != nil {
				return err
			}
			if asJSON {
				type worker struct {
					ID            string    `json:"id"`
					Address       string    `json:"address"`
					Cores         int32     `json:"cores"`
					LastHeartbeat time.Time `json:"last_heartbeat"`
				}
				out := []worker{}
				for _, w := range resp.GetWorkers() {
					out = append(out, worker{w.GetId(), w.GetAddress(), w.GetCores(), time.Unix(0, w.GetLastHeartbeatUnixNano()).UTC()})
				}
				return json.NewEncoder(e.out).Encode(out)
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tADDRESS\tCORES\tLAST HEARTBEAT")
			for _, w := range resp.GetWorkers() {
				hb := "-"
				if ns := w.GetLastHeartbeatUnixNano(); ns > 0 {
					hb = time.Since(time.Unix(0, ns)).Round(100*time.Millisecond).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", w.GetId(), w.GetAddress(), w.GetCores(), hb)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cf.register(cmd)
	return cmd
}

// predictValuesPerCall bounds the doubles of inputs in one Predict call, keeping messages
// well below gRPC's 4 MiB default.
const predictValuesPerCall = 1 << 16

// newClusterPredictCmd is the predict command with --job: the local predict (--model FILE)
// as before, and with --job ID the Predict RPC of a cluster, with the same CSV handling and
// the same output.
func newClusterPredictCmd(e *env) *cobra.Command {
	cmd := newPredictCmd(e)
	local := cmd.RunE
	var cf clientFlags
	var jobID string
	cmd.Use = "predict (--model FILE | --job ID) --data X.csv --out preds.csv"
	cmd.Long += `

With --job ID, the model of a finished cluster job predicts (the Predict RPC; give --addr and
the token as for submit); with --header and no --columns the inputs are the job's columns.`
	cmd.Example = `  coordinator predict --model gpreduce-demo.gpm --data X.csv --header --out preds.csv
  coordinator predict --job j-42 --addr 10.0.0.5:7100 --data X.csv --out preds.csv`
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		modelPath, _ := cmd.Flags().GetString("model")
		switch {
		case jobID == "" && modelPath == "":
			return fmt.Errorf("give --model FILE (a model on this machine) or --job ID (a cluster job's model)")
		case jobID != "" && modelPath != "":
			return fmt.Errorf("give --model or --job, not both")
		case jobID == "":
			return local(cmd, args)
		}
		dataPath, _ := cmd.Flags().GetString("data")
		outPath, _ := cmd.Flags().GetString("out")
		header, _ := cmd.Flags().GetBool("header")
		columns, _ := cmd.Flags().GetString("columns")
		if dataPath == "" || outPath == "" {
			return fmt.Errorf("--data and --out are required")
		}
		c, err := cf.connect(e.log)
		if err != nil {
			return err
		}
		defer c.Close()
		return predictJob(cmd.Context(), e.errOut, c, jobID, dataPath, outPath, header, columns)
	}
	cmd.Flags().StringVar(&jobID, "job", "", "predict with the model of this cluster job")
	cf.register(cmd)
	return cmd
}

func predictJob(ctx context.Context, errOut io.Writer, c *client, id, dataPath, outPath string, header bool, columns string) error {
	opts := shard.CSVOptions{Header: header, NoTarget: true}
	if columns != "" {
		opts.Columns = strings.Split(columns, ",")
	} else if header {
		j, err := getJob(ctx, c, id)
		if err != nil {
			return err
		}
		opts.Columns = j.GetSpec().GetData().GetColumns()
		if j.GetSpec().GetData().GetHeader() && len(opts.Columns) == 0 {
			// The job's inputs are all its columns but the target: do the same here.
			if t := j.GetSpec().GetData().GetTarget(); t != "" {
				if names, err := csvHeader(dataPath); err == nil {
					for _, n := range names {
						if n != t {
							opts.Columns = append(opts.Columns, n)
						}
					}
				}
			}
		}
	}
	x, err := shard.LoadCSV(dataPath, opts)
	if err != nil {
		return err
	}
	var mean, lat, noisy []float64
	var outside []bool
	per := max(1, predictValuesPerCall/x.D)
	for lo := 0; lo < x.N(); lo += per {
		hi := min(x.N(), lo+per)
		resp, err := call(ctx, c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.PredictResponse, error) {
			return cl.Predict(ctx, &pb.PredictRequest{JobId: id, D: int32(x.D), X: x.X[lo*x.D : hi*x.D]}, opts...)
		})
		if err != nil {
			return fmt.Errorf("predict with job %s: %w", id, err)
		}
		if len(resp.GetMean()) != hi-lo || len(resp.GetLatentVar()) != hi-lo || len(resp.GetNoisyVar()) != hi-lo {
			return fmt.Errorf("predict with job %s: the coordinator answered %d predictions for %d rows", id, len(resp.GetMean()), hi-lo)
		}
		mean = append(mean, resp.GetMean()...)
		lat = append(lat, resp.GetLatentVar()...)
		noisy = append(noisy, resp.GetNoisyVar()...)
		if o := resp.GetOutsideDomain(); len(o) > 0 {
			if len(o) != hi-lo {
				return fmt.Errorf("predict with job %s: the coordinator flagged %d of %d rows", id, len(o), hi-lo)
			}
			if outside == nil {
				outside = make([]bool, lo, x.N())
			}
			outside = append(outside, o...)
		} else if outside != nil {
			outside = append(outside, make([]bool, hi-lo)...)
		}
	}
	p := model.Prediction{Mean: mean, LatentVar: lat, NoisyVar: noisy, Outside: outside}
	for _, o := range outside {
		if o {
			p.NOutside++
		}
	}
	if p.NOutside > 0 {
		fmt.Fprintf(errOut, "predict: %d of %d rows lie outside the domain of job %s's model, where its features alias; they are predicted by the prior and flagged in the outside_domain column\n", p.NOutside, x.N(), id)
	}
	return writePredictions(outPath, p)
}

// csvHeader returns the names in the first line of a CSV file.
func csvHeader(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	line = strings.TrimPrefix(strings.TrimRight(line, "\r"), "\ufeff")
	var names []string
	for _, f := range strings.Split(line, ",") {
		names = append(names, strings.Trim(strings.TrimSpace(f), `"`))
	}
	return names, nil
}

// fetchModel returns the encoded model of a finished job (GetModel).
func fetchModel(ctx context.Context, c *client, id string) ([]byte, error) {
	var buf []byte
	err := c.do(ctx, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) error {
		buf = buf[:0]
		st, err := cl.GetModel(ctx, &pb.GetModelRequest{JobId: id}, opts...)
		if err != nil {
			return err
		}
		for {
			ch, err := st.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			buf = append(buf, ch.GetData()...)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("get the model of job %s: %w", id, err)
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("get the model of job %s: the coordinator sent no bytes", id)
	}
	return buf, nil
}

func newModelCmd(e *env) *cobra.Command {
	var cf clientFlags
	var out string
	cmd := &cobra.Command{
		Use:   "model ID --out FILE",
		Short: "Download the model of a finished job, for predict --model on this machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out is required: where to write the model")
			}
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			b, err := fetchModel(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if _, err := model.Decode(bytes.NewReader(b)); err != nil {
				return fmt.Errorf("the model of job %s does not decode: %w", args[0], err)
			}
			if err := writeFileAtomic(out, b); err != nil {
				return fmt.Errorf("write model: %w", err)
			}
			fmt.Fprintf(e.out, "%s (%d bytes)\n", out, len(b))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the model")
	cf.register(cmd)
	return cmd
}

// writeFileAtomic writes b to path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
