package model

import (
	"fmt"
	"slices"
)

// Posterior is the method-specific part of a model: what a training method learned beyond
// the common hyperparameters and standardization, and how to predict with it. Each
// implementation lives in its own file of this package with an init() that registers it
// (RegisterPosterior) under the name it is encoded with, so a new method adds its posterior
// without editing Model, Predict or the codec.
//
// All values are in standardized units: inputs are (x - XMean) / XScale and the target is
// (y - YMean) / YScale (Model.Transform); Model.Predict standardizes the rows, flags the
// rows outside Model.Domain and converts the results back to original units.
type Posterior interface {
	// Name is the name the posterior is registered and encoded under, for example "gl".
	Name() string
	// Validate checks that the posterior is complete and consistent with the model it
	// belongs to, so that Predict never panics on a model that passes. Model.Validate calls
	// it after checking the common fields, so m.D >= 1, m.Kernel names a kernel family and
	// m.Hyper has m.D lengthscales, all positive and finite.
	Validate(m *Model) error
	// Predictor prepares prediction for the model m (for example rebuilds a feature map
	// once) and returns the function that predicts one block of rows. Model.Predict calls
	// it once per prediction, on a model that passed Validate.
	Predictor(m *Model) (BlockPredictor, error)
	// Encode writes the posterior's section of the model encoding. Equal posteriors write
	// equal bytes, in any process; the section's decoder (RegisterPosterior) reads exactly
	// these bytes back into an equal posterior.
	Encode(e *Encoder)
	// Describe lists the posterior's sizes and settings for `model show`, for example its
	// feature count or rank (see Field). It is called on a valid model.
	Describe() []Field
}

// BlockPredictor writes the latent mean and variance, in standardized units, of rows
// standardized inputs xs (rows x D, row-major) into mean[:rows] and latentVar[:rows].
// Model.Predict calls it with at most 512 rows at a time.
type BlockPredictor func(xs []float64, rows int, mean, latentVar []float64)

// PosteriorDecoder reads a posterior section written by the posterior's Encode. It reports
// malformed input through d (Decoder.Fail, or the errors of its reads) and may return nil
// then; it need not check shapes, which Model.Validate does through Posterior.Validate.
type PosteriorDecoder func(d *Decoder) Posterior

// posteriors is the posterior registry: name -> decoder. It is written only by
// RegisterPosterior from the init functions of this package's posterior files and is
// read-only afterwards.
var posteriors = map[string]PosteriorDecoder{}

// RegisterPosterior registers a posterior's decoder under its name. Call it only from an
// init function; it panics on an empty or duplicate name (a programming error).
func RegisterPosterior(name string, decode PosteriorDecoder) {
	if name == "" || decode == nil {
		panic("model: RegisterPosterior needs a name and a decoder")
	}
	if _, dup := posteriors[name]; dup {
		panic(fmt.Sprintf("model: posterior %q registered twice", name))
	}
	posteriors[name] = decode
}

// PosteriorNames returns the registered posterior names, sorted.
func PosteriorNames() []string {
	names := make([]string, 0, len(posteriors))
	for name := range posteriors {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// lookupPosterior returns the decoder registered under name.
func lookupPosterior(name string) (PosteriorDecoder, bool) {
	dec, ok := posteriors[name]
	return dec, ok
}

// Field is one named value of a model's description (Model.Describe, Posterior.Describe),
// for `model show`. Name is a stable snake_case key (scripts may match on it); Value is a
// string, int, float64, bool, []int, []float64 or []string, so it prints as text and
// encodes as JSON or YAML without further conversion.
type Field struct {
	Name  string
	Value any
}
