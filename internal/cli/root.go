package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

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

// Execute runs the coordinator command line with args and returns the process exit code
// (see exitCode).
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{out: stdout, errOut: stderr, tty: isTerminal(stderr)}
	var lf logFlags
	root := &cobra.Command{
		Use:   "coordinator",
		Short: "Train Gaussian-process regression models on data too large for one machine",
		Long: `coordinator trains Gaussian-process regression models: on this machine (demo, eval,
predict) or on a cluster of coordinators and workers (serve, submit, status, jobs, logs,
model, predict --job, ...).

Commands that talk to a cluster read its address from --addr or the environment variable
GPREDUCE_ADDR, and the API token from --token, --token-file or GPREDUCE_TOKEN. Commands that
print take -o table|json|yaml (--json is -o json).

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			warnDeprecated(cmd, stderr)
			log, err := lf.logger(stderr, e.tty)
			e.log = log
			return err
		},
	}
	lf.register(root, "warn")
	root.AddCommand(newEvalCmd(e), newDemoCmd(e), newClusterPredictCmd(e), newImportCmd(e), newGenCmd(e))
	root.AddCommand(newSubmitCmd(e), newStatusCmd(e), newJobsCmd(e), newCancelCmd(e), newDeleteCmd(e), newLogsCmd(e),
		newMembersCmd(e), newWorkersCmd(e), newModelCmd(e), newServeCmd(e))
	addVersion(root)
	return runRoot(ctx, root, args, stdout, stderr)
}

// runRoot runs root with args and turns its outcome into an exit code, printing the error,
// prefixed by the program name, to stderr.
func runRoot(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// The help and completion commands, which cobra adds itself, now (they capture the output
	// streams), so that markUsageErrors covers them too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	markUsageErrors(root)
	err := root.ExecuteContext(ctx)
	code := exitCode(err)
	if err != nil && ctx.Err() != nil {
		code = ExitInterrupted
	}
	switch {
	case err == nil:
	case code == ExitInterrupted:
		fmt.Fprintf(stderr, "%s: interrupted\n", root.Name())
	case code == ExitUsage:
		fmt.Fprintf(stderr, "%s: %v\nrun '%s --help' for usage\n", root.Name(), err, root.Name())
	default:
		fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	}
	return code
}

// logFlags are the persistent --log-level and --log-format flags of both programs.
type logFlags struct {
	level, format string
}

// Log formats of --log-format.
var logFormats = []string{"console", "json"}

func (f *logFlags) register(root *cobra.Command, defLevel string) {
	fl := root.PersistentFlags()
	fl.StringVar(&f.level, "log-level", defLevel, "log level: debug, info, warn, error")
	fl.StringVar(&f.format, "log-format", "", "log format: console or json (default: console on a terminal, json otherwise)")
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions(logFormats, cobra.ShellCompDirectiveNoFileComp))
}

// logger returns the logger the flags describe, writing to w (stderr).
func (f *logFlags) logger(w io.Writer, tty bool) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(f.level)
	if err != nil {
		return zerolog.Nop(), usageErrorf("--log-level %q: give debug, info, warn or error", f.level)
	}
	console := tty
	switch strings.ToLower(strings.TrimSpace(f.format)) {
	case "":
	case "console":
		console = true
	case "json":
		console = false
	default:
		return zerolog.Nop(), usageErrorf("--log-format %q: give console or json", f.format)
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05", NoColor: !tty}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
