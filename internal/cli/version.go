package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/version"
)

// addVersion gives root a `version` subcommand and a --version flag, both printing the
// program name, version and git commit.
func addVersion(root *cobra.Command) {
	info := version.Get().String()
	root.Version = info
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version and the git commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", root.Name(), info)
			return err
		},
	})
}
