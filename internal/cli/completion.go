package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/train"
)

// completionTimeout bounds how long completing job IDs waits for the cluster.
const completionTimeout = 2 * time.Second

// completeJobIDs completes a job ID argument with the IDs of the cluster the command's client
// flags name (--addr, the token flags and their environment variables). When the cluster does
// not answer within completionTimeout, it quietly offers nothing.
// With many, every argument is a job ID (delete); otherwise only the first.
func completeJobIDs(cf *clientFlags, many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if !many && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return jobIDs(cmd.Context(), cf, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// jobIDs lists the cluster's job IDs that start with prefix and are not in skip, with each
// job's state and method as the description; nil on any failure.
func jobIDs(ctx context.Context, cf *clientFlags, skip []string, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	quiet := *cf
	quiet.leaderWait = min(quiet.leaderWait, completionTimeout)
	c, err := quiet.connect(zerolog.Nop())
	if err != nil {
		return nil
	}
	defer c.Close()
	resp, err := listJobs(ctx, c)
	if err != nil {
		return nil
	}
	var out []string
	for _, j := range resp.GetJobs() {
		id := j.GetId()
		if !strings.HasPrefix(id, prefix) || slices.Contains(skip, id) {
			continue
		}
		out = append(out, id+"\t"+stateName(j.GetState())+" "+j.GetSpec().GetMethod())
	}
	return out
}

// completeMethods completes --method: auto and the training methods.
func completeMethods(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return train.MethodNames(), cobra.ShellCompDirectiveNoFileComp
}

// completeKernels completes --kernel with the kernel families and auto (exact's evidence
// choice).
func completeKernels(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return append(kernel.FamilyNames(), train.KernelAuto), cobra.ShellCompDirectiveNoFileComp
}

// registerSpecCompletions adds the completions of the method-setting flags --method and
// --kernel to cmd, where they are defined.
func registerSpecCompletions(cmd *cobra.Command) {
	for name, fn := range map[string]cobra.CompletionFunc{"method": completeMethods, "kernel": completeKernels} {
		if cmd.Flags().Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, fn)
		}
	}
}
