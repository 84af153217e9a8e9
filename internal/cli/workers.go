package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func newWorkersCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the live workers the leader knows",
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
			resp, err := call(cmd.Context(), c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.ListWorkersResponse, error) {
				return cl.ListWorkers(ctx, &pb.ListWorkersRequest{}, opts...)
			})
			if err != nil {
				return err
			}
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
			return o.print(e.out, out, func(w io.Writer) error { return printWorkers(w, resp.GetWorkers()) })
		},
	}
	of.register(cmd)
	cf.register(cmd)
	return cmd
}

// printWorkers prints the workers as the table of `coordinator workers`.
func printWorkers(w io.Writer, workers []*pb.WorkerInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tCORES\tLAST HEARTBEAT")
	for _, w := range workers {
		hb := "-"
		if ns := w.GetLastHeartbeatUnixNano(); ns > 0 {
			hb = time.Since(time.Unix(0, ns)).Round(100*time.Millisecond).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", w.GetId(), w.GetAddress(), w.GetCores(), hb)
	}
	return tw.Flush()
}
