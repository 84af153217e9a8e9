package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/model"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

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
	get := newModelGetCmd(e)
	cmd := &cobra.Command{
		Use:   "model (get ID --out FILE | show FILE|ID)",
		Short: "Download a finished job's model (model get), or describe a model (model show)",
		Long: `model get downloads the model of a finished job, for predict --model on this machine;
model ID --out FILE is the same. model show prints a model's method, kernel,
hyperparameters (in the units of the data), sizes, domain and warnings, from a model file
or a cluster job.`,
		Example: `  coordinator model get j-42 --out j-42.gpm
  coordinator model show j-42.gpm
  coordinator model show j-42 -o yaml`,
		Args:              get.Args,
		ValidArgsFunction: get.ValidArgsFunction,
		RunE:              get.RunE,
	}
	cmd.Flags().AddFlagSet(get.Flags())
	cmd.AddCommand(get, newModelShowCmd(e))
	return cmd
}

// modelSaved is what model get prints.
type modelSaved struct {
	Job   string `json:"job"`
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

func newModelGetCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	var out string
	cmd := &cobra.Command{
		Use:               "get ID --out FILE",
		Short:             "Download the model of a finished job, for predict --model on this machine",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(&cf, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			if out == "" {
				return usageErrorf("--out is required: where to write the model")
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
			r := modelSaved{Job: args[0], Path: out, Bytes: len(b)}
			return o.print(e.out, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s (%d bytes)\n", out, len(b))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the model")
	of.register(cmd)
	cf.register(cmd)
	return cmd
}

func newModelShowCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "show FILE|ID",
		Short: "Print a model's method, kernel, hyperparameters, sizes, domain and warnings",
		Long: `model show describes a model: a model file (written by demo, eval --model-out or model get)
when FILE exists, else the model of the cluster job ID (give --addr and the token as for
status). Hyperparameters are in the units of the data: lengthscales in input units, the
variances in squared target units.`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return jobIDs(cmd.Context(), &cf, nil, toComplete), cobra.ShellCompDirectiveDefault
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			b, source, err := readModelArg(cmd, e, &cf, args[0])
			if err != nil {
				return err
			}
			m, err := model.Decode(bytes.NewReader(b))
			if err != nil {
				return fmt.Errorf("%s: %w", source, err)
			}
			d := describeModel(m, source, len(b))
			return o.print(e.out, d, func(w io.Writer) error { return printModelDescription(w, d) })
		},
	}
	of.register(cmd)
	cf.register(cmd)
	return cmd
}

// readModelArg returns the bytes of the model arg names: the file arg when it exists (or
// looks like a path), else the model of the cluster job arg.
func readModelArg(cmd *cobra.Command, e *env, cf *clientFlags, arg string) ([]byte, string, error) {
	b, err := os.ReadFile(arg)
	switch {
	case err == nil:
		return b, arg, nil
	case !errors.Is(err, fs.ErrNotExist) || strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".gpm"):
		return nil, "", fmt.Errorf("model file: %w", err)
	}
	c, err := cf.connect(e.log)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	b, err = fetchModel(cmd.Context(), c, arg)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not a file, and as a job ID: %w", arg, err)
	}
	return b, "job " + arg, nil
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
