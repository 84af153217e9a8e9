package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

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
