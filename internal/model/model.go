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

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// Version is the version of the model's body layout (Model.Version): 2 since posteriors
// are registered (a Version-1 body had a fixed group per method). Encode writes Version;
// Decode reads Version and version1 bodies, and a model it returns has Version Version.
const Version = 2

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

// Model is a trained GP regression model: the fields every method fills and the
// method-specific Posterior. Hyper is in standardized units (inputs and target scaled by
// Transform); Original converts.
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

	// Posterior is what the method learned beyond the fields above and how it predicts
	// (GLPosterior, RFFPosterior, ExactPosterior, GRIEFPosterior, ExpansionPosterior, or
	// any other registered Posterior).
	Posterior Posterior

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

	// TrainBox is the box of the standardized training inputs (each input's minimum and
	// maximum over the training rows; nil for a model trained before it was recorded).
	// Predict flags the rows beyond it by more than ExtrapolationLengthscales lengthscales
	// (the scaled distance to the box; Prediction.Extrapolated). An optional tagged section of the encoding.
	TrainBox *Domain

	// KernelReason says why Kernel was chosen when the job let exact, cg or kmcg choose the
	// family by the evidence (train.KernelAuto); empty when the job named the kernel. An
	// optional tagged section of the encoding.
	KernelReason string
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
	// Extrapolated flags the rows that lie beyond the training inputs' box by more than
	// ExtrapolationLengthscales lengthscales (nil for a model without a TrainBox). They are
	// predicted as usual; the flag says that the prediction there returns towards the prior.
	// NExtrapolated counts them; Beyond is the largest such distance in lengthscales and
	// BeyondInput the input farthest out in that row (-1 when no row is flagged).
	Extrapolated  []bool
	NExtrapolated int
	Beyond        float64
	BeyondInput   int
}

// predictBlock is how many rows are mapped to features at a time.
const predictBlock = 512

// Predict returns the predictive mean, latent variance and noisy variance for the rows of x
// (row-major, D columns, original units). It standardizes the rows, predicts them in blocks
// of predictBlock through the posterior, returns the prior for rows outside the Domain, flags
// the rows beyond the TrainBox, and converts back to original units.
func (m *Model) Predict(x []float64, rows int) (Prediction, error) {
	if len(x) != rows*m.D {
		return Prediction{}, fmt.Errorf("predict: %d values for %d rows of %d columns", len(x), rows, m.D)
	}
	if m.Posterior == nil {
		return Prediction{}, fmt.Errorf("predict: model has no posterior")
	}
	predict, err := m.Posterior.Predictor(m)
	if err != nil {
		return Prediction{}, fmt.Errorf("predict: %w", err)
	}
	p := Prediction{Mean: make([]float64, rows), LatentVar: make([]float64, rows), NoisyVar: make([]float64, rows), BeyondInput: -1}
	additive := m.additive()
	if m.TrainBox != nil {
		p.Extrapolated = make([]bool, rows)
	}
	xs := make([]float64, min(rows, predictBlock)*m.D)
	for lo := 0; lo < rows; lo += predictBlock {
		hi := min(rows, lo+predictBlock)
		n := hi - lo
		for i := 0; i < n; i++ {
			m.Transform.ApplyRow(x[(lo+i)*m.D:(lo+i+1)*m.D], xs[i*m.D:(i+1)*m.D])
		}
		if m.Domain != nil {
			if p.Outside == nil {
				p.Outside = make([]bool, rows)
			}
			for i := 0; i < n; i++ {
				p.Outside[lo+i] = !m.Domain.Contains(xs[i*m.D : (i+1)*m.D])
			}
		}
		if m.TrainBox != nil {
			for i := 0; i < n; i++ {
				r, k := m.beyondTrainBox(xs[i*m.D:(i+1)*m.D], additive)
				if r > ExtrapolationLengthscales {
					p.Extrapolated[lo+i] = true
					p.NExtrapolated++
					if r > p.Beyond {
						p.Beyond, p.BeyondInput = r, k
					}
				}
			}
		}
		predict(xs[:n*m.D], n, p.Mean[lo:hi], p.LatentVar[lo:hi])
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

// NumFeatures returns the number of basis features of a feature-space posterior (one with a
// NumFeatures method, as gl and rff), 0 for other posteriors.
func (m *Model) NumFeatures() int {
	if f, ok := m.Posterior.(interface{ NumFeatures() int }); ok {
		return f.NumFeatures()
	}
	return 0
}

// Encode writes the model: 8 magic bytes, EncodingVersion as a little-endian uint32, the
// 32-byte sha256 of the body, then the body: the model's fields in the binary layout of
// codec.go (the common fields, the posterior's name and section, the tagged sections). The
// same model always encodes to the same bytes, in any process. It fails for a model without
// a posterior or with one that is not registered; it does not otherwise validate.
func (m *Model) Encode(w io.Writer) error {
	var body bytes.Buffer
	e := &Encoder{w: &body}
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
	d := &Decoder{b: body}
	m := d.model()
	if d.err != nil {
		return nil, fmt.Errorf("decode model: %w", d.err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("decode model: %w", err)
	}
	return m, nil
}

// Validate checks that the model is complete and consistent, the common fields and then the
// posterior (Posterior.Validate), so that Predict never panics on a model that passes.
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
	if m.Posterior == nil {
		return fmt.Errorf("model has no posterior")
	}
	if _, ok := lookupPosterior(m.Posterior.Name()); !ok {
		return fmt.Errorf("posterior %q is not registered", m.Posterior.Name())
	}
	return m.Posterior.Validate(m)
}
