package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/shard"
)

func newImportCmd(e *env) *cobra.Command {
	var header bool
	var target, columns string
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "import IN.csv[.gz] OUT.csv",
		Short: "Check a CSV or gzipped CSV row by row and write its selected columns as plain CSV, which the cluster cuts into byte ranges",
		Long: `import reads IN (plain or gzipped CSV), checks every row as a job would (numbers,
field counts, NaN and infinities, line and field bounds), and writes the selected input
columns and the target to OUT as plain CSV with a header: the names in double quotes, the
target last, and every value in the shortest form that reads back to the same float64.
A gzipped CSV can only be read whole and cut into row ranges; the plain CSV import writes
is cut into line-aligned byte ranges that workers read in parallel. Submit it with
--header (and --target, the last column by default). OUT is replaced only when the whole
input is good.`,
		Example: `  coordinator import big.csv.gz big.csv --header --target y
  coordinator submit --method gl --data big.csv --header --shards 64`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			in, out := args[0], args[1]
			if strings.HasSuffix(out, ".gz") {
				return fmt.Errorf("import: %s: the output is plain CSV (byte ranges cannot be cut in a gzip file): drop the .gz suffix", out)
			}
			if a, errA := filepath.Abs(in); errA == nil {
				if b, errB := filepath.Abs(out); errB == nil && a == b {
					return fmt.Errorf("import: the output %s is the input: write to another file", out)
				}
			}
			opts := shard.CSVOptions{Header: header, Target: target}
			if columns != "" {
				opts.Columns = strings.Split(columns, ",")
			}
			tmp := out + ".tmp"
			f, err := os.Create(tmp)
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			n, err := shard.ImportFile(in, opts, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(tmp, out)
			}
			if err != nil {
				return errors.Join(err, removeIfExists(tmp))
			}
			r := struct {
				Input  string `json:"input"`
				Output string `json:"output"`
				Rows   int64  `json:"rows"`
			}{in, out, int64(n)}
			return o.print(e.out, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "imported %d rows from %s to %s\n", n, in, out)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&header, "header", false, "IN has a header line")
	cmd.Flags().StringVar(&target, "target", "", "target column: header name or 0-based index (default: the last column)")
	cmd.Flags().StringVar(&columns, "columns", "", "input columns, comma-separated names or 0-based indices (default: all but the target)")
	of.register(cmd)
	return cmd
}

// removeIfExists removes path, ignoring that it is not there.
func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
