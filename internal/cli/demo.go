package cli

import (
	"bytes"
	_ "embed"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
)

// maunaLoa is monthly atmospheric CO2 at Mauna Loa, 1959-1997 (decimal year, ppm), the
// classic one-dimensional GP example, shipped so the demo needs nothing else.
//
//go:embed testdata/maunaloa_co2.csv
var maunaLoa []byte

// demoSpec is the demo's method: Gauss-Legendre features with an RBF kernel. The seasonal
// cycle is about 0.09 standard deviations of the year column long, so lengthscales go down
// to 0.02 (a quarter of a year); the upper bound 0.3 keeps the grid below a thousand nodes.
func demoSpec() train.Spec {
	s := train.DefaultSpec("gl")
	s.LengthscaleBounds = [2]float64{0.02, 0.3}
	s.NoiseVarianceBounds = [2]float64{1e-4, 1}
	return s
}

// demoSplit holds out every tenth month for testing.
func demoSplit() (tr, te *shard.Table, err error) {
	all, err := shard.ReadCSV(bytes.NewReader(maunaLoa), "maunaloa_co2.csv (embedded)", shard.CSVOptions{Header: true})
	if err != nil {
		return nil, nil, err
	}
	tr = &shard.Table{Source: all.Source + " train", Columns: all.Columns, Target: all.Target, D: all.D}
	te = &shard.Table{Source: all.Source + " test", Columns: all.Columns, Target: all.Target, D: all.D}
	for i := 0; i < all.N(); i++ {
		dst := tr
		if i%10 == 9 {
			dst = te
		}
		dst.X = append(dst.X, all.Row(i)...)
		dst.Y = append(dst.Y, all.Y[i])
	}
	return tr, te, nil
}

func newDemoCmd(e *env) *cobra.Command {
	var out string
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Train Gauss-Legendre features on the bundled Mauna Loa CO2 series and report test metrics",
		Long: `demo trains a GP with Gauss-Legendre features (RBF kernel) on monthly Mauna Loa CO2,
1959-1997, holding out every tenth month, prints test RMSE, NLL and 95% coverage in ppm,
and writes the model to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tr, te, err := demoSplit()
			if err != nil {
				return err
			}
			fmt.Fprintf(e.out, "gpreduce demo: Mauna Loa CO2, %d training and %d test months, Gauss-Legendre features\n", tr.N(), te.N())
			pr := newProgress(e.errOut, e.tty)
			r, m, err := evaluate(cmd.Context(), demoSpec(), tr, te, rf, pr.observe)
			pr.done()
			if err != nil {
				return err
			}
			if err := writeModel(out, m); err != nil {
				return err
			}
			if abs, err := filepath.Abs(out); err == nil {
				r.ModelPath = abs
			} else {
				r.ModelPath = out
			}
			printResult(e, r)
			fmt.Fprintf(e.out, "\npredict with: coordinator predict --model %s --data X.csv --out preds.csv\n", r.ModelPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "gpreduce-demo.gpm", "where to write the trained model")
	rf.register(cmd)
	return cmd
}
