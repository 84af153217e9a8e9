package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

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
	if msg == "" && phase == "job" {
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

func newLogsCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's events (phases, optimizer iterations, state changes) until it finishes",
		Long: `logs prints a job's events as they happen and returns when the job is finished: a line
per event, or with -o json one JSON object per line, with -o yaml one YAML document per event.`,
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
			var werr error
			_, err = watchJob(cmd.Context(), c, args[0], func(ev *pb.JobEvent) {
				if werr == nil {
					werr = o.item(e.out, newEventJSON(ev), func(w io.Writer) error {
						_, err := fmt.Fprintln(w, formatEvent(ev))
						return err
					})
				}
			})
			if err != nil {
				return err
			}
			return werr
		},
	}
	of.register(cmd)
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
	if ev.GetMaxIter() > 0 && ev.GetIteration() > 0 {
		fmt.Fprintf(&b, "  iteration %d/%d", ev.GetIteration(), ev.GetMaxIter())
		if ev.GetObjective() != 0 {
			fmt.Fprintf(&b, "  -log p(y)/n = %.6f", ev.GetObjective())
		}
	}
	if ev.GetMessage() != "" {
		b.WriteString("  " + ev.GetMessage())
	}
	return b.String()
}
