package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// accessFlags are the data access flags of `coordinator serve` and `worker serve`: which
// files and URLs a job may name, and the bounds of reading them.
type accessFlags struct {
	roots, urls  []string
	allowPrivate bool
	maxLine      string
	maxFields    int
	readTimeout  time.Duration
}

// dataAccessHelp is the help text shared by the commands with access flags.
const dataAccessHelp = `Jobs read local files only under --data-root (repeatable; default: the working
directory alone) and http(s) URLs only when they match an --allow-url prefix
(https://data.example.com/sets/) or host pattern (data.example.com, *.example.com);
loopback, link-local and private addresses, checked after DNS resolution and on every
redirect, also need --allow-private-urls. The coordinators and every worker need the same
settings. A CSV line longer than --max-line-bytes, a row with more than --max-fields fields
and a source silent for --read-timeout fail their job.`

func (f *accessFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.roots, "data-root", nil, "directory whose files jobs may read (repeatable; default: the working directory)")
	fl.StringArrayVar(&f.urls, "allow-url", nil, "http(s) URL prefix or host pattern (host, *.domain) jobs may read (repeatable; default: none)")
	fl.BoolVar(&f.allowPrivate, "allow-private-urls", false, "allow allowed URLs to reach loopback, link-local and private addresses")
	fl.StringVar(&f.maxLine, "max-line-bytes", "1MiB", "longest CSV line accepted (bytes, or with a KiB or MiB suffix)")
	fl.IntVar(&f.maxFields, "max-fields", shard.DefaultMaxFields, "most fields accepted in a CSV row")
	fl.DurationVar(&f.readTimeout, "read-timeout", shard.DefaultReadTimeout, "fail an http(s) source that sends nothing for this long")
}

// reader returns the confined data reader the flags describe.
func (f *accessFlags) reader() (shard.Reader, error) {
	acc, err := shard.NewAccess(f.roots, f.urls, f.allowPrivate)
	if err != nil {
		return shard.Reader{}, fmt.Errorf("--data-root/--allow-url: %w", err)
	}
	maxLine, err := parseSize(f.maxLine)
	if err != nil || maxLine > 1<<30 {
		return shard.Reader{}, fmt.Errorf("--max-line-bytes %q: give a positive size up to 1GiB", f.maxLine)
	}
	if f.maxFields <= 0 {
		return shard.Reader{}, fmt.Errorf("--max-fields %d: must be positive", f.maxFields)
	}
	if f.readTimeout <= 0 {
		return shard.Reader{}, fmt.Errorf("--read-timeout %s: must be positive", f.readTimeout)
	}
	return shard.Reader{Access: acc, Limits: shard.Limits{MaxLineBytes: int(maxLine), MaxFields: f.maxFields, ReadTimeout: f.readTimeout}}, nil
}
