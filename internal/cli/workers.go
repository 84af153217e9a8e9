package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

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
