package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

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
  coordinator predict --job j-42 --addr 10.0.0.5:7100 --data X.csv --out preds.csv
  coordinator predict --model gpreduce-demo.gpm --data X.csv --header --out - | head`
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		modelPath, _ := cmd.Flags().GetString("model")
		switch {
		case jobID == "" && modelPath == "":
			return usageErrorf("give --model FILE (a model on this machine) or --job ID (a cluster job's model)")
		case jobID != "" && modelPath != "":
			return usageErrorf("give --model or --job, not both")
		case jobID == "":
			return local(cmd, args)
		}
		dataPath, _ := cmd.Flags().GetString("data")
		outPath, _ := cmd.Flags().GetString("out")
		header, _ := cmd.Flags().GetBool("header")
		columns, _ := cmd.Flags().GetString("columns")
		if dataPath == "" || outPath == "" {
			return usageErrorf("--data and --out are required (--out - writes to stdout)")
		}
		c, err := cf.connect(e.log)
		if err != nil {
			return err
		}
		defer c.Close()
		return predictJob(cmd.Context(), e, c, jobID, dataPath, outPath, header, columns)
	}
	cmd.Flags().StringVar(&jobID, "job", "", "predict with the model of this cluster job")
	_ = cmd.RegisterFlagCompletionFunc("job", completeJobIDs(&cf, false))
	cf.register(cmd)
	return cmd
}

func predictJob(ctx context.Context, e *env, c *client, id, dataPath, outPath string, header bool, columns string) error {
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
	var outside, extrapolated []bool
	per := max(1, predictValuesPerCall/x.D)
	pr := newProgress(e.errOut, e.tty)
	defer pr.done()
	calls := (x.N() + per - 1) / per
	for lo := 0; lo < x.N(); lo += per {
		hi := min(x.N(), lo+per)
		if e.tty {
			pr.observe(train.Event{Phase: "predict", Iteration: lo/per + 1, MaxIter: calls, Message: fmt.Sprintf("rows %d-%d of %d", lo+1, hi, x.N())})
		}
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
		for _, f := range []struct {
			name string
			got  []bool
			into *[]bool
		}{{"outside_domain", resp.GetOutsideDomain(), &outside}, {"extrapolated", resp.GetExtrapolated(), &extrapolated}} {
			if len(f.got) > 0 {
				if len(f.got) != hi-lo {
					return fmt.Errorf("predict with job %s: the coordinator's %s flags cover %d of %d rows", id, f.name, len(f.got), hi-lo)
				}
				if *f.into == nil {
					*f.into = make([]bool, lo, x.N())
				}
				*f.into = append(*f.into, f.got...)
			} else if *f.into != nil {
				*f.into = append(*f.into, make([]bool, hi-lo)...)
			}
		}
	}
	p := model.Prediction{Mean: mean, LatentVar: lat, NoisyVar: noisy, Outside: outside, Extrapolated: extrapolated, BeyondInput: -1}
	for i := range mean {
		if outside != nil && outside[i] {
			p.NOutside++
		}
		if extrapolated != nil && extrapolated[i] {
			p.NExtrapolated++
		}
	}
	if p.NOutside > 0 {
		fmt.Fprintf(e.errOut, "predict: %d of %d rows lie outside the domain of job %s's model, where its features alias; they are predicted by the prior and flagged in the outside_domain column\n", p.NOutside, x.N(), id)
	}
	if p.NExtrapolated > 0 {
		fmt.Fprintf(e.errOut, "predict: %d of %d rows lie beyond the training inputs' range of job %s's model by more than %g lengthscale: the model extrapolates there, its prediction returns towards the prior and does not follow a trend or any signal its kernel does not represent; they are flagged in the extrapolated column\n", p.NExtrapolated, x.N(), id, model.ExtrapolationLengthscales)
	}
	return writePredictions(e.out, outPath, p)
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
