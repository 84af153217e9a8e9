package model

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
)

// The posterior of the grief method: a GP-GRIEF eigenfunction map (features.GRIEF) and the
// posterior over its eigenfunctions.

func init() {
	RegisterPosterior(griefName, func(d *Decoder) Posterior {
		g := decodeGRIEFParams(d) // the map, then the posterior: the order matters
		return &GRIEFPosterior{Map: *g, Post: decodeGRIEFPost(d)}
	})
}

// decodeGRIEFParams reads the map as GRIEFPosterior.Encode writes it (the same fields in the
// same order as the Version-1 GRIEF section).
func decodeGRIEFParams(d *Decoder) *GRIEFParams {
	g := &GRIEFParams{}
	g.Lengthscales = d.Floats()
	g.SignalVariance = d.Float()
	g.Grid = d.Floatss()
	g.Q = d.Floatss()
	g.LogLam = d.Floatss()
	g.Idx = d.Ints()
	g.LogLamP = d.Floats()
	return g
}

// decodeGRIEFPost reads the posterior over the eigenfunctions as GRIEFPosterior.Encode writes
// it after the map.
func decodeGRIEFPost(d *Decoder) *GRIEFPost {
	q := &GRIEFPost{}
	q.Inference = d.Str()
	q.Beta = d.Floats()
	q.C = d.Floats()
	q.W = d.Floats()
	q.Samples = d.Int()
	return q
}

const griefName = "grief"

// GRIEFParams fixes a GP-GRIEF eigenfunction map (GP-GRIEF §3-4, eqs. 3-4): the base product
// kernel's lengthscales and signal variance (standardized units; the family is Model.Kernel),
// the inducing grid per dimension, each dimension's eigenvectors (row-major m_i x m_i) and log
// eigenvalues, the selected index tuples Idx (p x d, row-major) and their log eigenvalues.
type GRIEFParams struct {
	Lengthscales   []float64
	SignalVariance float64
	Grid           [][]float64
	Q              [][]float64
	LogLam         [][]float64
	Idx            []int
	LogLamP        []float64
}

// GRIEFPost is the GP-GRIEF posterior over the p eigenfunctions phi(x) (GP-GRIEF §5, eqs.
// 11-12, in the predictive equations of §2, eq. 2): latent mean phi(x) Beta and latent
// variance phi(x) C phi(x)^T, C row-major p x p. Type-II (GRIEF-II, w = 1), with A = Phi^T Phi
// and r = Phi^T y over the training rows: Beta = (A + s2 I)^-1 r and C = s2 (A + s2 I)^-1, W
// empty; type2-weights: Beta = V~ Sigma~^-1 (w .* r~ ./ (w + s2)) and
// C = V~ Sigma~^-1 diag(s2 w/(w + s2)) Sigma~^-1 V~^T in the transformed basis; type-I: Beta
// and the s2-independent part averaged over the MALA samples, C the mixture (mean of the
// per-sample C plus the covariance of the per-sample Beta). W holds the transformed-basis
// weights (type2-weights: the optimum; type-I: the sample mean of w). Models written before
// GRIEF-II's posterior was formed from A + s2 I hold the type-II posterior in the
// transformed-basis form, with W = Sigma~^2; both predict the same way.
type GRIEFPost struct {
	Inference string // type1, type2 (GRIEF-II) or type2-weights
	Beta      []float64
	C         []float64
	W         []float64
	Samples   int // type1: retained MALA samples
}

// GRIEFPosterior is the posterior of the grief method: the eigenfunction map and the
// posterior over its eigenfunctions.
type GRIEFPosterior struct {
	Map  GRIEFParams
	Post *GRIEFPost
}

// Name returns "grief".
func (p *GRIEFPosterior) Name() string { return griefName }

// FeatureMap rebuilds the eigenfunction map for the model's kernel family (Model.Kernel) and
// validates it.
func (p *GRIEFPosterior) FeatureMap(kernelFamily string) (*features.GRIEF, error) {
	fam, err := kernel.ParseFamily(kernelFamily)
	if err != nil {
		return nil, err
	}
	m := &p.Map
	g := &features.GRIEF{
		Family: fam, Lengthscales: m.Lengthscales, SignalVariance: m.SignalVariance,
		Grid: m.Grid, Q: m.Q, LogLam: m.LogLam, Idx: m.Idx, LogLamP: m.LogLamP,
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("GRIEF map: %w", err)
	}
	return g, nil
}

// Validate checks the map (features.GRIEF.Validate), its dimension against D, and the
// posterior's shapes and values against the map's p eigenfunctions.
func (p *GRIEFPosterior) Validate(m *Model) error {
	if p.Post == nil {
		return fmt.Errorf("grief posterior: a GRIEF map needs a posterior over its eigenfunctions")
	}
	g, err := p.FeatureMap(m.Kernel)
	if err != nil {
		return err
	}
	if g.Dim() != m.D {
		return fmt.Errorf("GRIEF map of %d dimensions for d=%d", g.Dim(), m.D)
	}
	q, n := p.Post, g.NumFeatures()
	if len(q.Beta) != n || len(q.C) != n*n || len(q.W) > n {
		return fmt.Errorf("GRIEF posterior shapes disagree with the map's %d eigenfunctions (beta %d, C %d, w %d)", n, len(q.Beta), len(q.C), len(q.W))
	}
	switch q.Inference {
	case "type1", "type2", "type2-weights":
	default:
		return fmt.Errorf("GRIEF posterior: unknown inference %q", q.Inference)
	}
	if q.Samples < 0 {
		return fmt.Errorf("GRIEF posterior: %d samples", q.Samples)
	}
	for _, v := range q.Beta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("GRIEF posterior: non-finite beta")
		}
	}
	for _, v := range q.C {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("GRIEF posterior: non-finite C")
		}
	}
	return nil
}

// Predictor rebuilds the eigenfunction map.
func (p *GRIEFPosterior) Predictor(m *Model) (BlockPredictor, error) {
	g, err := p.FeatureMap(m.Kernel)
	if err != nil {
		return nil, err
	}
	s := g.NumFeatures()
	var z []float64
	return func(xs []float64, rows int, mean, latentVar []float64) {
		if len(z) < rows*s {
			z = make([]float64, rows*s)
		}
		g.MapBlock(xs, rows, z)
		p.Post.Predict(z, rows, mean, latentVar)
	}, nil
}

// griefPredictBlock is the number of rows whose variances one product Z_b C forms.
const griefPredictBlock = 256

// Predict writes the latent mean and variance of the GRIEF posterior for rows feature
// rows z (rows x p, row-major): mean = z Beta, var = max(0, z C z^T) row by row. The rows
// go in blocks of at most griefPredictBlock: W = Z_b C is one product (linalg.Gemm; C is
// symmetric), and var_i = W_i . z_i. Each row's result depends only on that row.
func (q *GRIEFPost) Predict(z []float64, rows int, mean, latentVar []float64) {
	p := len(q.Beta)
	for i := 0; i < rows; i++ {
		zi := z[i*p : (i+1)*p]
		var mu float64
		for j, v := range zi {
			mu += v * q.Beta[j]
		}
		mean[i] = mu
	}
	if latentVar == nil || rows == 0 || p == 0 {
		return
	}
	w := make([]float64, min(rows, griefPredictBlock)*p)
	c := blas64.General{Rows: p, Cols: p, Stride: p, Data: q.C}
	for lo := 0; lo < rows; lo += griefPredictBlock {
		b := min(griefPredictBlock, rows-lo)
		zb := blas64.General{Rows: b, Cols: p, Stride: p, Data: z[lo*p : (lo+b)*p]}
		linalg.Gemm(blas.NoTrans, blas.NoTrans, 1, zb, c, 0, blas64.General{Rows: b, Cols: p, Stride: p, Data: w[:b*p]})
		for i := range b {
			zi, wi := z[(lo+i)*p:(lo+i+1)*p], w[i*p:(i+1)*p]
			var vr float64
			for k, v := range zi {
				vr += wi[k] * v
			}
			latentVar[lo+i] = math.Max(0, vr)
		}
	}
}

// Encode writes the map, then the posterior.
func (p *GRIEFPosterior) Encode(e *Encoder) {
	g := &p.Map
	e.Floats(g.Lengthscales)
	e.Float(g.SignalVariance)
	e.Floatss(g.Grid)
	e.Floatss(g.Q)
	e.Floatss(g.LogLam)
	e.Ints(g.Idx)
	e.Floats(g.LogLamP)
	q := p.Post
	if q == nil {
		e.Fail(fmt.Errorf("grief posterior: a GRIEF map without a posterior over its eigenfunctions"))
		return
	}
	e.Str(q.Inference)
	e.Floats(q.Beta)
	e.Floats(q.C)
	e.Floats(q.W)
	e.Int(q.Samples)
}

// Describe lists the number of eigenfunctions, the inducing grid's size per dimension, the
// inference and, for type1, the retained samples.
func (p *GRIEFPosterior) Describe() []Field {
	grid := make([]int, len(p.Map.Grid))
	for k, g := range p.Map.Grid {
		grid[k] = len(g)
	}
	f := []Field{{"eigenfunctions", len(p.Map.LogLamP)}, {"grid", grid}, {"inference", p.Post.Inference}}
	if p.Post.Inference == "type1" {
		f = append(f, Field{"samples", p.Post.Samples})
	}
	return f
}
