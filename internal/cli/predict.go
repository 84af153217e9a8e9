package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
)

func newPredictCmd(e *env) *cobra.Command {
	var modelPath, dataPath, outPath, columns string
	var header bool
	cmd := &cobra.Command{
		Use:   "predict",
		Short: "Predict the mean, latent variance and noisy variance for each row of a CSV of inputs",
		Long: `predict reads a model written by demo or eval --model-out and a CSV whose rows are inputs
(the model's input columns, in order; or select them with --header --columns), and writes a CSV
with columns mean, latent_var, noisy_var in the original units of the target.

A model whose approximation holds only in a box of inputs (gl: its Gauss-Legendre grid
aliases beyond the lags it was sized for) adds a column outside_domain (1 for rows outside
the box, 0 inside); those rows get the prior mean and variance, and stderr says how many.

A model that records its training inputs' range (every model trained since it was
recorded) adds a column extrapolated: 1 for rows beyond that range by more than one
lengthscale (the distance to the range scaled by each input's lengthscale), where a stationary GP's prediction returns towards its prior
mean and misses a trend; they are predicted as usual, and stderr says how many and how far.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelPath == "" || dataPath == "" || outPath == "" {
				return usageErrorf("--model, --data and --out are required (--out - writes to stdout)")
			}
			f, err := os.Open(modelPath)
			if err != nil {
				return fmt.Errorf("open model: %w", err)
			}
			m, err := model.Decode(bufio.NewReader(f))
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", modelPath, err)
			}
			opts := shard.CSVOptions{Header: header, NoTarget: true}
			if columns != "" {
				opts.Columns = strings.Split(columns, ",")
			} else if header && len(m.Columns) == m.D {
				opts.Columns = m.Columns
			}
			x, err := shard.LoadCSV(dataPath, opts)
			if err != nil {
				return err
			}
			if x.D != m.D {
				return fmt.Errorf("%s has %d input columns; the model was trained on %d (%s)", dataPath, x.D, m.D, strings.Join(m.Columns, ","))
			}
			pr := newProgress(e.errOut, e.tty)
			if e.tty {
				pr.observe(train.Event{Phase: "predict", Message: fmt.Sprintf("%d rows with the %s model", x.N(), m.Method)})
			}
			p, err := m.Predict(x.X, x.N())
			pr.done()
			if err != nil {
				return err
			}
			if p.NOutside > 0 {
				fmt.Fprintf(e.errOut, "predict: %s\n", outsideMessage(m, p.NOutside, x.N()))
			}
			if p.NExtrapolated > 0 {
				fmt.Fprintf(e.errOut, "predict: %s\n", extrapolationMessage(m, p, x.N()))
			}
			return writePredictions(e.out, outPath, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelPath, "model", "", "model file")
	fl.StringVar(&dataPath, "data", "", "CSV of inputs")
	fl.StringVar(&outPath, "out", "", "where to write the predictions CSV (- for stdout)")
	fl.BoolVar(&header, "header", false, "the data CSV has a header line")
	fl.StringVar(&columns, "columns", "", "input columns by name or 0-based index (default: the model's column names with --header, else all)")
	return cmd
}

// writePredictions writes the predictions CSV to path, or to stdout when path is "-".
func writePredictions(stdout io.Writer, path string, p model.Prediction) error {
	var b strings.Builder
	b.WriteString("mean,latent_var,noisy_var")
	if p.Outside != nil {
		b.WriteString(",outside_domain")
	}
	if p.Extrapolated != nil {
		b.WriteString(",extrapolated")
	}
	b.WriteByte('\n')
	for i := range p.Mean {
		b.WriteString(strconv.FormatFloat(p.Mean[i], 'g', -1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(p.LatentVar[i], 'g', -1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(p.NoisyVar[i], 'g', -1, 64))
		for _, flags := range [][]bool{p.Outside, p.Extrapolated} {
			if flags == nil {
				continue
			}
			if flags[i] {
				b.WriteString(",1")
			} else {
				b.WriteString(",0")
			}
		}
		b.WriteByte('\n')
	}
	if path == "-" {
		if _, err := io.WriteString(stdout, b.String()); err != nil {
			return fmt.Errorf("write predictions: %w", err)
		}
		return nil
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write predictions: %w", err)
	}
	return nil
}
