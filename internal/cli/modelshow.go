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
	D               int    `json:"d"`
	// Inputs are the input columns' names, in order; Target the target's.
	Inputs          []string    `json:"inputs"`
	Target          string      `json:"target"`
	NTrain          int         `json:"n_train"`
	Iterations      int         `json:"iterations"`
	LogLikelihood   float64     `json:"log_likelihood"`
	LogLikelihoodSE float64     `json:"log_likelihood_se,omitempty"`
	Hyperparameters hyperResult `json:"hyperparameters"`
	Sizes           modelSizes  `json:"sizes"`
	// Domain is the box of inputs, in their original units, where the approximation holds
	// (absent: everywhere).
	Domain   []domainRange   `json:"domain,omitempty"`
	Warnings []warningResult `json:"warnings"`
}

// modelSizes are the sizes of a model's posterior; each method sets its own.
type modelSizes struct {
	// Features is the number of basis functions (gl, rff).
	Features int `json:"features,omitempty"`
	// NodesPerDim is gl's Gauss-Legendre grid.
	NodesPerDim []int `json:"nodes_per_dim,omitempty"`
	// StoredRows is the number of training inputs the model keeps (exact, cg, kmcg).
	StoredRows int `json:"stored_rows,omitempty"`
	// VarianceRank is the rank of cg's and kmcg's predictive-variance terms.
	VarianceRank int `json:"variance_rank,omitempty"`
	// Eigenfunctions is grief's p, Grid its inducing points per input column, Inference and
	// Samples its inference and type-I MALA samples.
	Eigenfunctions int    `json:"eigenfunctions,omitempty"`
	Grid           []int  `json:"grid,omitempty"`
	Inference      string `json:"inference,omitempty"`
	Samples        int    `json:"samples,omitempty"`
}

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
	s := &d.Sizes
	if m.Features != nil {
		s.Features = len(m.Features.Beta)
	}
	if m.GL != nil {
		s.NodesPerDim = m.GL.NodesPerDim
	}
	if e := m.Exact; e != nil && e.D > 0 {
		s.StoredRows = len(e.X) / e.D
	}
	if e := m.Expansion; e != nil && e.D > 0 {
		s.StoredRows, s.VarianceRank = len(e.X)/e.D, e.RMinus+e.RPlus
	}
	if g := m.GRIEF; g != nil {
		for _, pts := range g.Grid {
			s.Grid = append(s.Grid, len(pts))
		}
		s.Eigenfunctions = len(g.LogLamP)
	}
	if p := m.GRIEFPost; p != nil {
		s.Inference, s.Samples = p.Inference, p.Samples
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
	s := d.Sizes
	if s.Features > 0 {
		sizes = append(sizes, fmt.Sprintf("%d features", s.Features))
	}
	if len(s.NodesPerDim) > 0 {
		sizes = append(sizes, "nodes per dim "+fmtInts(s.NodesPerDim))
	}
	if s.StoredRows > 0 {
		sizes = append(sizes, fmt.Sprintf("%d stored rows", s.StoredRows))
	}
	if s.VarianceRank > 0 {
		sizes = append(sizes, fmt.Sprintf("variance rank %d", s.VarianceRank))
	}
	if s.Eigenfunctions > 0 {
		sizes = append(sizes, fmt.Sprintf("%d eigenfunctions", s.Eigenfunctions))
	}
	if len(s.Grid) > 0 {
		sizes = append(sizes, "grid "+fmtInts(s.Grid))
	}
	if s.Inference != "" {
		sizes = append(sizes, "inference "+s.Inference)
	}
	if s.Samples > 0 {
		sizes = append(sizes, fmt.Sprintf("%d samples", s.Samples))
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
