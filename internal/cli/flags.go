package cli

import (
	"fmt"

	"github.com/rs/zerolog"
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
