package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpreduce/gpreduce/internal/model"
)

// modelDescription is what `model show` prints about a model: its method, kernel,
// hyperparameters in the original units, sizes, domain and warnings.
type modelDescription struct {
	// Source is the model file or "job ID".
	Source string `json:"source"`
	Bytes  int    `json:"bytes"`
	Method string `json:"method"`
	Kernel string `json:"kernel"`
	// MethodRequested is "auto" when the method was chosen automatically, MethodReason why.
	MethodRequested string `json:"method_requested,omitempty"`
	MethodReason    string `json:"method_reason,omitempty"`
	// KernelReason says why exact, cg or kmcg chose Kernel by the evidence (--kernel auto).
	KernelReason string `json:"kernel_reason,omitempty"`
	D            int    `json:"d"`
	// Inputs are the input columns' names, in order; Target the target's.
	Inputs          []string    `json:"inputs"`
	Target          string      `json:"target"`
	NTrain          int         `json:"n_train"`
	Iterations      int         `json:"iterations"`
	LogLikelihood   float64     `json:"log_likelihood"`
	LogLikelihoodSE float64     `json:"log_likelihood_se,omitempty"`
	Hyperparameters hyperResult `json:"hyperparameters"`
	// Posterior is the model's registered posterior and Sizes what it says of its size.
	Posterior string     `json:"posterior"`
	Sizes     modelSizes `json:"sizes"`
	sizeOrder []string
	// Domain is the box of inputs, in their original units, where the approximation holds
	// (absent: everywhere).
	Domain   []domainRange   `json:"domain,omitempty"`
	Warnings []warningResult `json:"warnings"`
}

// modelSizes are the sizes of a model's posterior, as its registered posterior describes
// them (model.Posterior.Describe: features, nodes_per_dim, stored_rows, eigenfunctions ...),
// keyed by those names.
type modelSizes map[string]any

// domainRange is one input column's interval of a model's domain.
type domainRange struct {
	Column string  `json:"column"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
}

// describeModel describes m, read from source (size bytes).
func describeModel(m *model.Model, source string, size int) *modelDescription {
	h := m.Original()
	d := &modelDescription{
		Source: source, Bytes: size, Method: m.Method, Kernel: m.Kernel, D: m.D, Target: m.Target,
		NTrain: m.NTrain, Iterations: m.Iterations, LogLikelihood: m.LogLik, LogLikelihoodSE: m.LogLikSE,
		Hyperparameters: hyperResult{Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance, NoiseVariance: h.NoiseVariance},
		Warnings:        warningsOf(m.Warnings),
	}
	for k := range m.D {
		d.Inputs = append(d.Inputs, columnName(m, k))
	}
	if c := m.Choice; c != nil {
		d.MethodRequested, d.MethodReason = c.Requested, c.Reason
	}
	d.KernelReason = m.KernelReason
	if m.Posterior != nil {
		d.Posterior = m.Posterior.Name()
		for _, f := range m.Posterior.Describe() {
			if d.Sizes == nil {
				d.Sizes = modelSizes{}
			}
			d.Sizes[f.Name] = f.Value
			d.sizeOrder = append(d.sizeOrder, f.Name)
		}
	}
	if dom := m.Domain; dom != nil && len(dom.Lo) == m.D && len(m.Transform.XScale) == m.D {
		for k := range m.D {
			sc, mu := m.Transform.XScale[k], m.Transform.XMean[k]
			d.Domain = append(d.Domain, domainRange{Column: columnName(m, k), Lo: dom.Lo[k]*sc + mu, Hi: dom.Hi[k]*sc + mu})
		}
	}
	return d
}

// columnName is the name of m's input column k: its header name, or xK.
func columnName(m *model.Model, k int) string {
	if k < len(m.Columns) && m.Columns[k] != "" {
		return m.Columns[k]
	}
	return fmt.Sprintf("x%d", k)
}

// printModelDescription prints d as `model show` does without -o.
func printModelDescription(w io.Writer, d *modelDescription) error {
	fmt.Fprintf(w, "model       %s (%d bytes)\n", d.Source, d.Bytes)
	fmt.Fprintf(w, "method      %s (kernel %s)\n", d.Method, d.Kernel)
	if d.MethodRequested != "" {
		fmt.Fprintf(w, "chosen by   %s: %s\n", d.MethodRequested, d.MethodReason)
	}
	if d.KernelReason != "" {
		fmt.Fprintf(w, "kernel by   evidence: %s\n", d.KernelReason)
	}
	fmt.Fprintf(w, "inputs      %s (d = %d); target %s\n", strings.Join(d.Inputs, ", "), d.D, d.Target)
	fmt.Fprintf(w, "trained on  %d rows, %d iterations, log p(y) = %.6g", d.NTrain, d.Iterations, d.LogLikelihood)
	if d.LogLikelihoodSE > 0 {
		fmt.Fprintf(w, " ± %.2g", d.LogLikelihoodSE)
	}
	fmt.Fprintln(w, " (standardized target)")
	fmt.Fprintf(w, "lengthscale %s\n", fmtList(d.Hyperparameters.Lengthscales))
	fmt.Fprintf(w, "signal var  %.6g\n", d.Hyperparameters.SignalVariance)
	fmt.Fprintf(w, "noise var   %.6g\n", d.Hyperparameters.NoiseVariance)
	var sizes []string
	for _, k := range d.sizeOrder {
		v := d.Sizes[k]
		switch v := v.(type) {
		case []int:
			sizes = append(sizes, fmt.Sprintf("%s %s", strings.ReplaceAll(k, "_", " "), fmtInts(v)))
		case []float64:
			sizes = append(sizes, fmt.Sprintf("%s %s", strings.ReplaceAll(k, "_", " "), fmtList(v)))
		default:
			sizes = append(sizes, fmt.Sprintf("%s %v", strings.ReplaceAll(k, "_", " "), v))
		}
	}
	if len(sizes) > 0 {
		fmt.Fprintf(w, "size        %s\n", strings.Join(sizes, ", "))
	}
	if len(d.Domain) > 0 {
		parts := make([]string, len(d.Domain))
		for i, r := range d.Domain {
			parts[i] = fmt.Sprintf("%s in [%.6g, %.6g]", r.Column, r.Lo, r.Hi)
		}
		fmt.Fprintf(w, "domain      %s\n", strings.Join(parts, ", "))
	}
	printWarnings(w, d.Warnings)
	return nil
}

// fmtInts joins integers with spaces.
func fmtInts(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, " ")
}
