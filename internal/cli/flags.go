package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ServeFlags returns the flags, with their defaults, of `coordinator serve`
// (program "coordinator") or `worker serve` (program "worker"), including the programs'
// persistent flags (--log-level, --log-format). Deployment checks parse a manifest's container arguments
// with it, so that a misspelt flag or a port that differs from what the binary opens is
// caught before a cluster sees it.
func ServeFlags(program string) (*pflag.FlagSet, error) {
	fs := pflag.NewFlagSet(program+" serve", pflag.ContinueOnError)
	switch program {
	case "coordinator":
		fs.AddFlagSet(newServeCmd(&env{}).Flags())
	case "worker":
		log := zerolog.Nop()
		fs.AddFlagSet(newWorkerServeCmd(&log).Flags())
	default:
		return nil, fmt.Errorf("no program %q: give coordinator or worker", program)
	}
	fs.String("log-level", "", "log level")
	fs.String("log-format", "", "log format")
	return fs, nil
}

// aliasAnnotation marks a flag as the deprecated alias of the flag it names.
const aliasAnnotation = "gpreduce-deprecated-alias"

// deprecatedAlias hides flag old of cmd, an old name of flag use that still works; using it
// prints a notice (warnDeprecated).
func deprecatedAlias(cmd *cobra.Command, old, use string) {
	_ = cmd.Flags().MarkHidden(old)
	_ = cmd.Flags().SetAnnotation(old, aliasAnnotation, []string{use})
}

// warnDeprecated writes a notice to w for each deprecated alias set on cmd's command line.
func warnDeprecated(cmd *cobra.Command, w io.Writer) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if use, ok := f.Annotations[aliasAnnotation]; ok && len(use) == 1 {
			fmt.Fprintf(w, "Flag --%s is deprecated: use --%s\n", f.Name, use[0])
		}
	})
}

// secondsDuration is a duration flag that also takes a bare number of seconds, the form of
// the timeout flags that used to be integers (--shard-timeout 300); the unit-less form is
// deprecated and warns on stderr.
type secondsDuration struct {
	d    *time.Duration
	name string
	warn io.Writer
}

func (s *secondsDuration) String() string {
	if s.d == nil || *s.d == 0 {
		return "0" // pflag's help shows no default for "0"
	}
	return s.d.String()
}

func (s *secondsDuration) Set(v string) error {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > 1<<30 {
			return fmt.Errorf("%d seconds is out of range", n)
		}
		if s.warn != nil {
			fmt.Fprintf(s.warn, "Flag --%s: a number of seconds without a unit is deprecated; write %ds\n", s.name, n)
		}
		*s.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration: write e.g. 90s, 5m or 1h", v)
	}
	*s.d = d
	return nil
}

func (s *secondsDuration) Type() string { return "duration" }

// secondsDurationVar defines a duration flag on fs that also accepts bare seconds (see
// secondsDuration); warn receives the deprecation notice.
func secondsDurationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string, warn io.Writer) {
	*p = def
	fs.Var(&secondsDuration{d: p, name: name, warn: warn}, name, usage)
}

// wholeSeconds converts the duration of flag to whole seconds, as job specs carry them.
func wholeSeconds(flag string, d time.Duration) (int, error) {
	if d < 0 || d%time.Second != 0 || d > (1<<30)*time.Second {
		return 0, usageErrorf("--%s %s: give a whole number of seconds, at least 0s", flag, d)
	}
	return int(d / time.Second), nil
}
