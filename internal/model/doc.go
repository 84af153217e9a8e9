// Package model holds trained models: the learned hyperparameters, the standardization of
// the training data and the posterior each method needs to predict, with a versioned binary
// encoding. Predictions (mean, latent variance, noisy variance) are in the original units of
// the target; Score scores them against held-out targets.
//
// A method's posterior is a type implementing Posterior, in its own file of this package
// (posterior_*.go) with an init() that registers its name and decoder (RegisterPosterior).
// Model, Predict and the codec know posteriors only through the interface and the registry,
// so a new method adds one file here, its tests, and a hand-built model of its kind in
// helpers_test.go (the registry round-trip test asks for one).
package model
