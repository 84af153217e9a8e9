package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/version"
)

// versionResult is what version -o json|yaml prints.
type versionResult struct {
	Program   string `json:"program"`
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
}

// addVersion gives root a `version` subcommand and a --version flag, both printing the
// program name, version and git commit.
func addVersion(root *cobra.Command) {
	v := version.Get()
	info := v.String()
	root.Version = info
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and the git commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			r := versionResult{Program: root.Name(), Version: v.Version, Commit: v.Commit, GoVersion: v.GoVersion}
			return o.print(cmd.OutOrStdout(), r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s %s\n", root.Name(), info)
				return err
			})
		},
	}
	of.register(cmd)
	root.AddCommand(cmd)
}
