package model

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/solver"
)

// Version is the version of the model's field layout (Model.Version, the body of an
// encoded model). Decode accepts only versions it knows.
const Version = 1

// Encoding versions of the file header. EncodingVersion, written by Encode, is the
// checksummed envelope: the header is followed by the sha256 of the body, which Decode
// checks. legacyEncoding, a body without a checksum (files written before it existed), is
// still read.
const (
	EncodingVersion = 2
	legacyEncoding  = 1
)

// magic opens every encoded model.
var magic = [8]byte{'G', 'P', 'R', 'M', 'O', 'D', 'E', 'L'}

// Hyper holds GP hyperparameters: lengthscales in input units, signal and noise variances in
// squared target units.
type Hyper struct {
	Lengthscales   []float64
	SignalVariance float64
	NoiseVariance  float64
}

// GLParams fixes a Gauss-Legendre feature map: the box half-widths U (angular frequency per
// standardized input unit) and nodes per dimension.
type GLParams struct {
	U           []float64
	NodesPerDim []int
}

// RFFParams fixes a random Fourier feature map: base frequencies (Features/2 rows of D).
type RFFParams struct {
	Omega    []float64
	Features int
}

// GRIEFParams fixes a GP-GRIEF eigenfunction map (digest 001 §1): the base product kernel's
// lengthscales and signal variance (standardized units; the family is Model.Kernel), the
// inducing grid per dimension, each dimension's eigenvectors (row-major m_i x m_i) and log
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

// GRIEFPost is the GP-GRIEF posterior over the p eigenfunctions phi(x) (digest 001 §2.5):
// latent mean phi(x) Beta and latent variance phi(x) C phi(x)^T, C row-major p x p. Type-II:
// Beta = V~ Sigma~^-1 (w .* r~ ./ (w + s2)) and C = V~ Sigma~^-1 diag(s2 w/(w + s2)) Sigma~^-1 V~^T;
// type-I: Beta and the s2-independent part averaged over the MALA samples, C the mixture
// (mean of the per-sample C plus the covariance of the per-sample Beta). W holds the
// transformed-basis weights (type-II: the optimum; type-I: the sample mean of w).
type GRIEFPost struct {
	Inference string // type1, type2 (GRIEF-II) or type2-weights
	Beta      []float64
	C         []float64
	W         []float64
	Samples   int // type1: retained MALA samples
}

// Model is a trained GP regression model. Hyper is in standardized units (inputs and target
// scaled by Transform); Original converts. Exactly one of the posterior groups is set:
// Features with GL or RFF, Exact, GRIEFPost with GRIEF, or Expansion.
type Model struct {
	Version   int
	Method    string
	Kernel    string
	D         int
	Columns   []string
	Target    string
	Transform shard.Transform
	Hyper     Hyper
	LogLik    float64 // log marginal likelihood of the standardized training targets
	// LogLikSE is the standard error of LogLik when it is a stochastic estimate (cg's
	// stochastic Lanczos quadrature), 0 when LogLik is exact. Encoded as an optional tagged
	// section.
	LogLikSE   float64
	Trace      []float64 // objective (negative log marginal likelihood) after each iteration
	Iterations int
	NTrain     int

	GL       *GLParams
	RFF      *RFFParams
	Features *solver.FeaturePredictor
	Exact    *solver.ExactPredictor

	GRIEF     *GRIEFParams
	GRIEFPost *GRIEFPost

	// Expansion is the posterior of the conjugate-gradient methods cg and kmcg: a kernel
	// expansion over stored standardized inputs with low-rank variance terms.
	Expansion *solver.ExpansionPredictor

	// Warnings lists what a user should know before trusting the model: a hyperparameter on
	// its bound, an unconverged optimizer, the all-noise optimum, automatic sizing (see the
	// Warn* codes). Encoded as an optional tagged section.
	Warnings []Warning

	// Domain is the box of standardized inputs in which the approximation is accurate (nil:
	// everywhere); Predict returns the prior outside it. Sizing records the lengthscale bounds
	// the automatic sizing used; Choice the method --method auto chose. All three are optional
	// tagged sections of the encoding.
	Domain *Domain
	Sizing *Sizing
	Choice *MethodChoice
}

// GRIEFMap rebuilds the model's GRIEF feature map and validates it.
func (m *Model) GRIEFMap() (*features.GRIEF, error) {
	if m.GRIEF == nil {
		return nil, fmt.Errorf("model has no GRIEF map")
	}
	fam, err := kernel.ParseFamily(m.Kernel)
	if err != nil {
		return nil, err
	}
	g := &features.GRIEF{
		Family: fam, Lengthscales: m.GRIEF.Lengthscales, SignalVariance: m.GRIEF.SignalVariance,
		Grid: m.GRIEF.Grid, Q: m.GRIEF.Q, LogLam: m.GRIEF.LogLam, Idx: m.GRIEF.Idx, LogLamP: m.GRIEF.LogLamP,
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("GRIEF map: %w", err)
	}
	return g, nil
}

// Predict writes the latent mean and variance of the GRIEF posterior for rows feature
// rows z (rows x p, row-major): mean = z Beta, var = max(0, z C z^T) row by row.
func (q *GRIEFPost) Predict(z []float64, rows int, mean, latentVar []float64) {
	p := len(q.Beta)
	zc := make([]float64, p)
	for i := 0; i < rows; i++ {
		zi := z[i*p : (i+1)*p]
		var mu float64
		for j, v := range zi {
			mu += v * q.Beta[j]
		}
		mean[i] = mu
		// zc = z_i C (C symmetric), then var = zc . z_i.
		clear(zc)
		for j, v := range zi {
			if v == 0 {
				continue
			}
			cj := q.C[j*p : (j+1)*p]
			for k := range zc {
				zc[k] += v * cj[k]
			}
		}
		var vr float64
		for k, v := range zi {
			vr += zc[k] * v
		}
		latentVar[i] = math.Max(0, vr)
	}
}

// Original returns the hyperparameters in the original units of the data:
// l_k * XScale_k, sigma_f^2 * YScale^2, sigma_n^2 * YScale^2.
func (m *Model) Original() Hyper {
	h := Hyper{Lengthscales: make([]float64, len(m.Hyper.Lengthscales))}
	for k, l := range m.Hyper.Lengthscales {
		h.Lengthscales[k] = l * m.Transform.XScale[k]
	}
	s2 := m.Transform.YScale * m.Transform.YScale
	h.SignalVariance = m.Hyper.SignalVariance * s2
	h.NoiseVariance = m.Hyper.NoiseVariance * s2
	return h
}

// Prediction holds per-row predictions in original target units.
type Prediction struct {
	Mean      []float64
	LatentVar []float64 // variance of the latent function f(x)
	NoisyVar  []float64 // variance of a new noisy observation y = f(x) + eps
	// Outside flags the rows outside the model's Domain (nil for a model without one); they
	// carry the prior: mean YMean, latent variance sigma_f^2, noisy variance sigma_f^2 + sigma_n^2.
	Outside []bool
	// NOutside counts the flagged rows.
	NOutside int
}

// predictBlock is how many rows are mapped to features at a time.
const predictBlock = 512

// Predict returns the predictive mean, latent variance and noisy variance for the rows of x
// (row-major, D columns, original units).
func (m *Model) Predict(x []float64, rows int) (Prediction, error) {
	if len(x) != rows*m.D {
		return Prediction{}, fmt.Errorf("predict: %d values for %d rows of %d columns", len(x), rows, m.D)
	}
	p := Prediction{Mean: make([]float64, rows), LatentVar: make([]float64, rows), NoisyVar: make([]float64, rows)}
	xs := make([]float64, min(rows, predictBlock)*m.D)
	var fm featureMap
	var z []float64
	switch {
	case m.GL != nil:
		fam, err := kernel.ParseFamily(m.Kernel)
		if err != nil {
			return Prediction{}, err
		}
		gl, err := features.NewGL(fam, m.GL.U, m.GL.NodesPerDim)
		if err != nil {
			return Prediction{}, fmt.Errorf("predict: rebuild features: %w", err)
		}
		fm = gl.MapBlock
		z = make([]float64, min(rows, predictBlock)*gl.NumFeatures())
	case m.RFF != nil:
		fam, err := kernel.ParseFamily(m.Kernel)
		if err != nil {
			return Prediction{}, err
		}
		r := &features.RFF{Family: fam, D: m.D, Omega: m.RFF.Omega}
		ls := m.Hyper.Lengthscales
		fm = func(x []float64, rows int, dst []float64) { r.MapBlock(ls, x, rows, dst) }
		z = make([]float64, min(rows, predictBlock)*m.RFF.Features)
	case m.GRIEF != nil:
		g, err := m.GRIEFMap()
		if err != nil {
			return Prediction{}, fmt.Errorf("predict: %w", err)
		}
		fm = g.MapBlock
		z = make([]float64, min(rows, predictBlock)*g.NumFeatures())
	}
	for lo := 0; lo < rows; lo += predictBlock {
		hi := min(rows, lo+predictBlock)
		n := hi - lo
		for i := 0; i < n; i++ {
			m.Transform.ApplyRow(x[(lo+i)*m.D:(lo+i+1)*m.D], xs[i*m.D:(i+1)*m.D])
		}
		mean, lv := p.Mean[lo:hi], p.LatentVar[lo:hi]
		if m.Domain != nil {
			if p.Outside == nil {
				p.Outside = make([]bool, rows)
			}
			for i := 0; i < n; i++ {
				p.Outside[lo+i] = !m.Domain.Contains(xs[i*m.D : (i+1)*m.D])
			}
		}
		switch {
		case fm != nil:
			fm(xs[:n*m.D], n, z)
			if m.GRIEFPost != nil {
				m.GRIEFPost.Predict(z, n, mean, lv)
			} else {
				m.Features.Predict(z, n, mean, lv)
			}
		case m.Exact != nil:
			m.Exact.Predict(xs[:n*m.D], mean, lv)
		case m.Expansion != nil:
			m.Expansion.Predict(xs[:n*m.D], mean, lv)
		default:
			return Prediction{}, fmt.Errorf("predict: model has no posterior")
		}
	}
	s2 := m.Transform.YScale * m.Transform.YScale
	for i := range p.Mean {
		if p.Outside != nil && p.Outside[i] {
			// Outside the domain the features alias; the exact GP there returns to its prior.
			p.NOutside++
			p.Mean[i], p.LatentVar[i] = 0, m.Hyper.SignalVariance
		}
		p.Mean[i] = p.Mean[i]*m.Transform.YScale + m.Transform.YMean
		p.LatentVar[i] *= s2
		p.NoisyVar[i] = p.LatentVar[i] + m.Hyper.NoiseVariance*s2
	}
	return p, nil
}

type featureMap func(x []float64, rows int, dst []float64)

// Encode writes the model: 8 magic bytes, EncodingVersion as a little-endian uint32, the
// 32-byte sha256 of the body, then the body: the model's fields in the fixed binary layout
// of codec.go. The same model always encodes to the same bytes, in any process.
func (m *Model) Encode(w io.Writer) error {
	var body bytes.Buffer
	e := &encoder{w: &body}
	e.model(m)
	if e.err != nil {
		return fmt.Errorf("encode model: %w", e.err)
	}
	sum := sha256.Sum256(body.Bytes())
	bw := bufio.NewWriter(w)
	bw.Write(magic[:])
	var v [4]byte
	binary.LittleEndian.PutUint32(v[:], EncodingVersion)
	bw.Write(v[:])
	bw.Write(sum[:])
	bw.Write(body.Bytes())
	if err := bw.Flush(); err != nil { // a bufio.Writer keeps its first error
		return fmt.Errorf("encode model: %w", err)
	}
	return nil
}

// Bytes returns the encoded model.
func (m *Model) Bytes() ([]byte, error) {
	var b bytes.Buffer
	if err := m.Encode(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads a model written by Encode, checks its sha256, and checks that it is
// complete and consistent, so a decoded model never panics in Predict. A model whose bytes
// do not match their checksum (a damaged file) is refused. Models of the legacy encoding,
// which has no checksum, are read without that check.
func Decode(r io.Reader) (*Model, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil || head != magic {
		return nil, fmt.Errorf("decode model: not a gpreduce model file (bad magic)")
	}
	var v uint32
	if err := binary.Read(r, binary.LittleEndian, &v); err != nil {
		return nil, fmt.Errorf("decode model: %w", err)
	}
	var want [sha256.Size]byte
	switch v {
	case EncodingVersion:
		if _, err := io.ReadFull(r, want[:]); err != nil {
			return nil, fmt.Errorf("decode model: %w: the checksum is cut short", errTruncated)
		}
	case legacyEncoding:
	default:
		return nil, fmt.Errorf("decode model: encoding version %d; this build reads versions %d and %d: "+
			"use a gpreduce build that wrote it, or retrain", v, legacyEncoding, EncodingVersion)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decode model: %w", err)
	}
	if v == EncodingVersion {
		if got := sha256.Sum256(body); got != want {
			return nil, fmt.Errorf("decode model: the file is damaged: its contents have sha256 %s but it was written with %s; "+
				"fetch the model again (coordinator model) or retrain", hex.EncodeToString(got[:8]), hex.EncodeToString(want[:8]))
		}
	}
	d := &decoder{b: body}
	m := d.model()
	if d.err != nil {
		return nil, fmt.Errorf("decode model: %w", d.err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("decode model: %w", err)
	}
	return m, nil
}

// Validate checks the shapes of every part of the model.
func (m *Model) Validate() error {
	if m.Version != Version {
		return fmt.Errorf("model version %d, want %d", m.Version, Version)
	}
	if _, err := kernel.ParseFamily(m.Kernel); err != nil {
		return err
	}
	d := m.D
	if d < 1 || len(m.Hyper.Lengthscales) != d || len(m.Transform.XMean) != d || len(m.Transform.XScale) != d {
		return fmt.Errorf("model dimensions disagree: d=%d, %d lengthscales, %d column means", d, len(m.Hyper.Lengthscales), len(m.Transform.XMean))
	}
	for _, v := range append(append([]float64{m.Hyper.SignalVariance, m.Hyper.NoiseVariance, m.Transform.YScale}, m.Hyper.Lengthscales...), m.Transform.XScale...) {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("model has a nonpositive or infinite scale %v", v)
		}
	}
	if err := validateWarnings(m.Warnings); err != nil {
		return err
	}
	if !(m.LogLikSE >= 0) || math.IsInf(m.LogLikSE, 0) {
		return fmt.Errorf("log likelihood standard error %v must be non-negative and finite", m.LogLikSE)
	}
	if err := validateDomain(m); err != nil {
		return err
	}
	groups := 0
	if (m.GL != nil || m.RFF != nil) != (m.Features != nil) {
		return fmt.Errorf("a feature map needs a feature posterior and the other way round")
	}
	if m.Features != nil {
		groups++
		s := len(m.Features.Beta)
		if s < 1 || len(m.Features.SqrtH) != s || len(m.Features.R) != s*s {
			return fmt.Errorf("feature posterior shapes disagree (s=%d)", s)
		}
		switch {
		case m.GL != nil && m.RFF == nil:
			if len(m.GL.U) != d || len(m.GL.NodesPerDim) != d {
				return fmt.Errorf("GL feature map has %d box widths and %d node counts for d=%d", len(m.GL.U), len(m.GL.NodesPerDim), d)
			}
			prod := 1
			for _, k := range m.GL.NodesPerDim {
				if k < 1 || prod > s {
					return fmt.Errorf("GL node counts %v do not give %d features", m.GL.NodesPerDim, s)
				}
				prod *= k
			}
			if prod != s {
				return fmt.Errorf("GL node counts %v do not give %d features", m.GL.NodesPerDim, s)
			}
		case m.RFF != nil && m.GL == nil:
			if m.RFF.Features != s || s < 2 || s%2 != 0 || len(m.RFF.Omega) != s/2*d {
				return fmt.Errorf("RFF map of %d features and %d frequencies for s=%d", m.RFF.Features, len(m.RFF.Omega), s)
			}
		default:
			return fmt.Errorf("feature posterior needs exactly one feature map")
		}
	}
	if m.Exact != nil {
		groups++
		n := len(m.Exact.Alpha)
		if n < 1 || m.Exact.D != d || len(m.Exact.X) != n*d || len(m.Exact.R) != n*n {
			return fmt.Errorf("exact posterior shapes disagree (n=%d)", n)
		}
		k := m.Exact.Kernel
		if _, err := kernel.ParseFamily(k.Family.String()); err != nil {
			return fmt.Errorf("exact posterior: %w", err)
		}
		if k.Dim() != d {
			return fmt.Errorf("exact posterior: kernel of %d lengthscales for d=%d", k.Dim(), d)
		}
		if err := k.Validate(); err != nil {
			return fmt.Errorf("exact posterior: %w", err)
		}
		if !(m.Exact.Noise > 0) {
			return fmt.Errorf("exact posterior: noise variance %v", m.Exact.Noise)
		}
	}
	if (m.GRIEF != nil) != (m.GRIEFPost != nil) {
		return fmt.Errorf("a GRIEF map needs a GRIEF posterior and the other way round")
	}
	if m.GRIEF != nil {
		groups++
		g, err := m.GRIEFMap()
		if err != nil {
			return err
		}
		if g.Dim() != d {
			return fmt.Errorf("GRIEF map of %d dimensions for d=%d", g.Dim(), d)
		}
		q, p := m.GRIEFPost, g.NumFeatures()
		if len(q.Beta) != p || len(q.C) != p*p || len(q.W) > p {
			return fmt.Errorf("GRIEF posterior shapes disagree with the map's %d eigenfunctions (beta %d, C %d, w %d)", p, len(q.Beta), len(q.C), len(q.W))
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
	}
	if x := m.Expansion; x != nil {
		groups++
		if err := x.Validate(); err != nil {
			return err
		}
		if x.D != d || x.Kernel.Dim() != d {
			return fmt.Errorf("expansion posterior: D=%d and a kernel of %d lengthscales for d=%d", x.D, x.Kernel.Dim(), d)
		}
		if fam, _ := kernel.ParseFamily(m.Kernel); x.Kernel.Family != fam {
			return fmt.Errorf("expansion posterior: %s kernel in a %s model", x.Kernel.Family, m.Kernel)
		}
	}
	if groups != 1 {
		return fmt.Errorf("model has %d posteriors, want 1", groups)
	}
	return nil
}
