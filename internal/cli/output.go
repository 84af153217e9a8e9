package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// The output formats of -o: a table (or key-value lines) for people, JSON and YAML for
// programs.
const (
	outTable = "table"
	outJSON  = "json"
	outYAML  = "yaml"
)

// outputFormats are the values -o accepts, in the order help and completion list them.
var outputFormats = []string{outTable, outJSON, outYAML}

// outputFlags are -o/--output and its alias --json, which every command that prints has.
type outputFlags struct {
	format string
	json   bool
}

// register adds -o/--output and --json to cmd.
func (o *outputFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&o.format, "output", "o", outTable, "output format: "+strings.Join(outputFormats, ", "))
	fl.BoolVar(&o.json, "json", false, "same as -o json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// output checks the flags and returns the chosen format; a bad value is a usage error.
func (o *outputFlags) output() (output, error) {
	f := strings.ToLower(strings.TrimSpace(o.format))
	switch f {
	case outTable, outJSON, outYAML:
	default:
		return output{}, usageErrorf("-o %q: give one of %s", o.format, strings.Join(outputFormats, ", "))
	}
	if o.json {
		if f == outYAML {
			return output{}, usageErrorf("--json and -o yaml disagree: give one of them")
		}
		f = outJSON
	}
	return output{format: f}, nil
}

// output is a chosen output format; the zero output prints tables.
type output struct {
	format string
}

// structured reports whether the output is JSON or YAML rather than a table.
func (o output) structured() bool { return o.format == outJSON || o.format == outYAML }

// print writes v as one JSON object (one line) or one YAML document, or calls table for the
// table form.
func (o output) print(w io.Writer, v any, table func(io.Writer) error) error {
	switch o.format {
	case outJSON:
		return json.NewEncoder(w).Encode(v)
	case outYAML:
		b, err := toYAML(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return table(w)
}

// item writes one element of a stream (events as they come): a JSON line, or a YAML
// document opened by "---", or calls line for the table form.
func (o output) item(w io.Writer, v any, line func(io.Writer) error) error {
	if o.format == outYAML {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
	}
	return o.print(w, v, line)
}

// toYAML renders v as YAML with the names of its JSON form.
func toYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("yaml output: %w", err)
	}
	b, err := yaml.JSONToYAML(j)
	if err != nil {
		return nil, fmt.Errorf("yaml output: %w", err)
	}
	return b, nil
}
