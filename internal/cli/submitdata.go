package cli

import (
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// submitFlags are submit's data and run flags (the method's flags are specFlags). The data
// flags are eval's where they mean the same: --uci DIR --split K, --header, --target,
// --columns and --train-rows; --data with --format names any other source (a CSV path or
// URL, or a UCI directory with --format uci).
type submitFlags struct {
	data, format, target, columns string
	uci                           string
	split, shards, trainRows      int
	timeout                       time.Duration
	header                        bool
	id                            string
}

// submitDataOnlyFlags are the data flags of submit that a job file also replaces but
// jobFlagNames does not list.
var submitDataOnlyFlags = []string{"uci", "train-rows"}

// register adds the flags to cmd; warn receives deprecation notices.
func (f *submitFlags) register(cmd *cobra.Command, warn io.Writer) {
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "", "data: a CSV path (made absolute), file:// or http(s):// URL, or a UCI dataset directory (with --format uci)")
	fl.StringVar(&f.uci, "uci", "", "UCI dataset directory (data.csv.gz and test_mask.csv.gz): the training rows of --split; same as --data DIR --format uci")
	fl.StringVar(&f.format, "format", "csv", "data format: csv or uci")
	fl.IntVar(&f.split, "split", 0, "uci: split 0-9 (its training rows)")
	fl.BoolVar(&f.header, "header", false, "csv: the file has a header line")
	fl.StringVar(&f.target, "target", "", "csv: target column, header name or 0-based index (default: the last column)")
	fl.StringVar(&f.columns, "columns", "", "csv: input columns, comma-separated names or 0-based indices (default: all but the target)")
	fl.IntVar(&f.trainRows, "train-rows", 0, "train on a fixed random sample of this many training rows, the same as eval --train-rows (0: all)")
	fl.IntVar(&f.shards, "shards", 0, "number of shards, fixed for the job (default: automatic, from the data size)")
	secondsDurationVar(fl, &f.timeout, "shard-timeout", 0, "how long a round waits for a shard with no live worker before the job fails, e.g. 5m (default 5m)", warn)
	fl.StringVar(&f.id, "id", "", "job ID (default: the coordinator chooses one); submitting an ID twice is an error")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"csv", "uci"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("uci")
}

// given reports whether the flags name a data source.
func (f *submitFlags) given() bool { return f.data != "" || f.uci != "" }

// withJobFile returns the data flags set on cmd, beyond jobFlagNames, that a job file
// would replace.
func (f *submitFlags) withJobFile(cmd *cobra.Command) []string {
	var set []string
	for _, n := range submitDataOnlyFlags {
		if cmd.Flags().Changed(n) {
			set = append(set, "--"+n)
		}
	}
	return set
}

// source returns the data source the flags describe and the shard timeout in whole seconds.
func (f *submitFlags) source() (shard.Source, int, error) {
	src := shard.Source{URI: f.data, Format: f.format, Split: f.split, Header: f.header, Target: f.target, TrainRows: f.trainRows}
	if f.uci != "" {
		if f.data != "" {
			return shard.Source{}, 0, usageErrorf("give --uci DIR or --data URI, not both")
		}
		if f.format != "csv" && f.format != "uci" {
			return shard.Source{}, 0, usageErrorf("--uci with --format %s: --uci is a UCI dataset; drop --format", f.format)
		}
		src.URI, src.Format = f.uci, "uci"
	}
	if f.columns != "" {
		src.Columns = strings.Split(f.columns, ",")
	}
	if f.trainRows < 0 {
		return shard.Source{}, 0, usageErrorf("--train-rows %d: give a positive number of rows, or 0 for all", f.trainRows)
	}
	sec, err := wholeSeconds("shard-timeout", f.timeout)
	return src, sec, err
}
