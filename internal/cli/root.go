package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// env is what every command shares: its output streams, whether stderr is a terminal, and
// the logger.
type env struct {
	out, errOut io.Writer
	tty         bool
	log         zerolog.Logger
}

// Execute runs the coordinator command line with args and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{out: stdout, errOut: stderr, tty: isTerminal(stderr)}
	var logLevel string
	root := &cobra.Command{
		Use:           "coordinator",
		Short:         "Train Gaussian-process regression models on data too large for one machine",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			lvl, err := zerolog.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			var w io.Writer = stderr
			if e.tty {
				w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05"}
			}
			e.log = zerolog.New(w).Level(lvl).With().Timestamp().Logger()
			return nil
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	root.AddCommand(newEvalCmd(e), newDemoCmd(e), newClusterPredictCmd(e), newImportCmd(e))
	root.AddCommand(newSubmitCmd(e), newStatusCmd(e), newJobsCmd(e), newCancelCmd(e), newDeleteCmd(e), newLogsCmd(e),
		newMembersCmd(e), newWorkersCmd(e), newModelCmd(e), newServeCmd(e))
	addVersion(root)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "coordinator: interrupted")
			return 130
		}
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 1
	}
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
