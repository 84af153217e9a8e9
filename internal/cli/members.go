package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/coordinator"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func newMembersCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the coordinators (raft members) and which one leads",
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
			ms, err := listMembers(cmd.Context(), c)
			if err != nil {
				return err
			}
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
			return o.print(e.out, out, func(w io.Writer) error { return printMembers(w, ms) })
		},
	}
	of.register(cmd)
	cf.register(cmd)
	cmd.AddCommand(newMembersRemoveCmd(e))
	return cmd
}

// printMembers prints the members as the table of `coordinator members`.
func printMembers(w io.Writer, ms []*pb.Member) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT\tAPI\tLEADER")
	for _, m := range ms {
		l := ""
		if m.GetLeader() {
			l = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.GetId(), m.GetRaftAddress(), m.GetApiAddress(), l)
	}
	return tw.Flush()
}

func newMembersRemoveCmd(e *env) *cobra.Command {
	var cf clientFlags
	var of outputFlags
	var secretFile string
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a coordinator from the raft configuration (for a member that is gone for good)",
		Long: `members remove takes a coordinator out of the raft configuration, so the quorum no longer
counts it: use it for a member whose machine is gone, before replacing it. Removing the
leader makes it step down. Stop the removed member's process too; to bring it back, wipe its
--data-dir and start it with --join.

A cluster with a raft secret (serve --raft-secret-file, or env ` + raftSecretEnv + `) changes its
membership only for a caller that proves the secret: give the members' --raft-secret-file
(or set ` + raftSecretEnv + `) as well as the API token.`,
		Example: `  coordinator members remove c3 --raft-secret-file raft.secret`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			secret, err := tokenFrom(secretFile, raftSecretEnv, "--raft-secret-file")
			if err != nil {
				return err
			}
			c, err := cf.connect(e.log)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := call(cmd.Context(), c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.RemoveMemberResponse, error) {
				ctx = coordinator.WithRemoveMemberProof(ctx, []byte(secret), args[0])
				return cl.RemoveMember(ctx, &pb.RemoveMemberRequest{Id: args[0]}, opts...)
			}); err != nil {
				return fmt.Errorf("remove member %s: %w", args[0], err)
			}
			r := struct {
				ID      string `json:"id"`
				Removed bool   `json:"removed"`
			}{args[0], true}
			return o.print(e.out, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "member %s: removed\n", args[0])
				return err
			})
		},
	}
	cmd.Flags().StringVar(&secretFile, "raft-secret-file", "", "file holding the members' raft secret (default: env "+raftSecretEnv+")")
	of.register(cmd)
	cf.register(cmd)
	return cmd
}

func listMembers(ctx context.Context, c *client) ([]*pb.Member, error) {
	resp, err := call(ctx, c, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) (*pb.ListMembersResponse, error) {
		return cl.ListMembers(ctx, &pb.ListMembersRequest{}, opts...)
	})
	return resp.GetMembers(), err
}
