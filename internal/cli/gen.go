package cli

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/spf13/cobra"
)

// genStream seeds gen's random draws together with --seed.
const genStream = 0x67656e

// genResult is what gen prints about the file it wrote.
type genResult struct {
	Path  string  `json:"path"`
	Rows  int     `json:"rows"`
	Dims  int     `json:"dims"`
	Noise float64 `json:"noise"`
	Seed  uint64  `json:"seed"`
}

func newGenCmd(e *env) *cobra.Command {
	var rows, dims int
	var noise float64
	var seed uint64
	var out string
	var of outputFlags
	cmd := &cobra.Command{
		Use:   "gen --out FILE.csv",
		Short: "Write a synthetic regression dataset as CSV with a header (for trying eval and submit)",
		Long: `gen writes --rows rows of synthetic data to --out (- for stdout): inputs x0, x1, ... drawn
uniformly from [-2, 2] and the target y = sum_k sin(1.5 x_k + 0.7 k) + noise, where the noise
is Gaussian with standard deviation --noise. The header names the columns x0, ..., y, so
the file trains with --header (the target is the last column). The same flags write the same
bytes.`,
		Example: `  coordinator gen --rows 2000 --dims 2 --out train.csv
  coordinator eval --data train.csv --header --test-tail 0.2
  coordinator gen --rows 5 --dims 1 --noise 0 --out -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := of.output()
			if err != nil {
				return err
			}
			switch {
			case out == "":
				return usageErrorf("--out is required: the CSV file to write, or - for stdout")
			case rows < 1 || rows > 1<<30:
				return usageErrorf("--rows %d: give a number of rows from 1 to 2^30", rows)
			case dims < 1 || dims > 1000:
				return usageErrorf("--dims %d: give a number of input columns from 1 to 1000", dims)
			case !(noise >= 0) || math.IsInf(noise, 0):
				return usageErrorf("--noise %g: give a standard deviation >= 0", noise)
			}
			if out == "-" {
				return writeSynthetic(e.out, rows, dims, noise, seed)
			}
			tmp := out + ".tmp"
			f, err := os.Create(tmp)
			if err != nil {
				return fmt.Errorf("gen: %w", err)
			}
			w := bufio.NewWriter(f)
			err = writeSynthetic(w, rows, dims, noise, seed)
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(tmp, out)
			}
			if err != nil {
				_ = removeIfExists(tmp)
				return fmt.Errorf("gen: %w", err)
			}
			r := genResult{Path: out, Rows: rows, Dims: dims, Noise: noise, Seed: seed}
			return o.print(e.out, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "wrote %d rows of %d inputs and a target y to %s\n", rows, dims, out)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&rows, "rows", 1000, "number of rows")
	fl.IntVar(&dims, "dims", 2, "number of input columns")
	fl.Float64Var(&noise, "noise", 0.1, "standard deviation of the Gaussian noise added to the target")
	fl.Uint64Var(&seed, "seed", 1, "seed of the random draws")
	fl.StringVar(&out, "out", "", "CSV file to write (- for stdout)")
	of.register(cmd)
	return cmd
}

// writeSynthetic writes gen's CSV: a header, then rows of inputs and target.
func writeSynthetic(w io.Writer, rows, dims int, noise float64, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, genStream))
	bw := bufio.NewWriter(w)
	for k := range dims {
		fmt.Fprintf(bw, "x%d,", k)
	}
	bw.WriteString("y\n")
	x := make([]float64, dims)
	buf := make([]byte, 0, 32)
	for range rows {
		y := 0.0
		for k := range x {
			x[k] = -2 + 4*rng.Float64()
			y += math.Sin(1.5*x[k] + 0.7*float64(k))
		}
		y += noise * rng.NormFloat64()
		for _, v := range x {
			bw.Write(strconv.AppendFloat(buf[:0], v, 'g', 8, 64))
			bw.WriteByte(',')
		}
		bw.Write(strconv.AppendFloat(buf[:0], y, 'g', 8, 64))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
